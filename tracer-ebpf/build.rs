//! Rebuild the object when bpf-linker changes (it is the linker for the bpf target).
fn main() {
    match which::which("bpf-linker") {
        Ok(path) => println!("cargo:rerun-if-changed={}", path.display()),
        Err(_) => println!("cargo:warning=bpf-linker not found on PATH: run `cargo xtask setup`"),
    }
}
