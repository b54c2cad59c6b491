//! Builds the eBPF programs (crate `tracer-ebpf`) for bpfel-unknown-none with the nightly toolchain and
//! bpf-linker, and leaves the object at `$OUT_DIR/tracer`, which `src/attach.rs` embeds.
//! `cargo xtask setup` installs what this needs.
use std::path::Path;

fn main() -> anyhow::Result<()> {
    let manifest = std::env::var("CARGO_MANIFEST_DIR")?;
    let root = Path::new(&manifest).join("../tracer-ebpf");
    let root = root.to_str().ok_or_else(|| anyhow::anyhow!("non-UTF-8 path {}", root.display()))?;
    aya_build::build_ebpf(
        [aya_build::Package { name: "tracer-ebpf", root_dir: root, no_default_features: false, features: &[] }],
        aya_build::Toolchain::default(),
    )
}
