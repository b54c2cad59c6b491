//! Builds the eBPF programs (crate `tracer-ebpf`) for bpfel-unknown-none with the nightly toolchain and
//! bpf-linker, and leaves the object at `$OUT_DIR/tracer`, which `src/attach/mod.rs` embeds.
//! `cargo xtask setup` installs what this needs.
use std::path::Path;

// A build-dependency only so that cargo rebuilds the object when the eBPF crate changes.
use tracer_ebpf as _;

fn main() -> anyhow::Result<()> {
    // AYA_BUILD_SKIP=1 (fuzzing, IDEs): no eBPF build; an empty object stands in so the crate compiles,
    // and recording then fails at load with a clear error.
    if std::env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true")) {
        let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("tracer");
        if !out.exists() {
            std::fs::write(out, [])?;
        }
    }
    let manifest = std::env::var("CARGO_MANIFEST_DIR")?;
    let root = Path::new(&manifest).join("../tracer-ebpf");
    let root = root.to_str().ok_or_else(|| anyhow::anyhow!("non-UTF-8 path {}", root.display()))?;
    aya_build::build_ebpf(
        [aya_build::Package { name: "tracer-ebpf", root_dir: root, no_default_features: false, features: &[] }],
        aya_build::Toolchain::default(),
    )
}
