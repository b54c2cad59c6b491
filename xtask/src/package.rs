//! tracer for users, without the test dependencies: `cargo xtask deb` (a Debian package: the binary, its man
//! page and the systemd unit) and `cargo xtask install` (the same files under a prefix).
//!
//! Neither installs `ROCm` or CUDA: tracer probes the runtime copies a user's processes map, whichever
//! release they are. Building needs only what the eBPF build needs (nightly `rust-src`, bpf-linker).
//!
//! The package is made with Debian's own `dpkg-deb`, and its dependencies are computed by `dpkg-shlibdeps`
//! from the binary: both come with dpkg-dev, while cargo-deb would be one more tool to compile on every
//! machine that builds the package, for the same three files.

use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};

use crate::{output, root, run, step, tracer_bin};

/// The systemd unit as shipped (its `ExecStart` names `/usr/bin/tracer`, where the package puts it).
const UNIT: &str = "docs/tracer-ollama.service";
const UNIT_NAME: &str = "tracer-ollama.service";
const PACKAGED_BIN: &str = "/usr/bin/tracer";

/// Builds tracer (release) with what the eBPF build needs, nothing else.
pub(crate) fn build_tracer() -> Result<()> {
    crate::nightly_rust_src()?;
    crate::bpf_linker()?;
    crate::cargo_build_tracer()
}

/// Writes the man pages into `dir` (`tracer generate man DIR`, from the command line's own definition);
/// returns their paths.
fn man_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    run(Command::new(tracer_bin()).args(["generate", "man"]).arg(dir))?;
    let mut pages: Vec<PathBuf> = fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    pages.retain(|p| p.extension().is_some_and(|e| e == "1"));
    pages.sort();
    if pages.is_empty() {
        bail!("`tracer generate man` wrote no page into {}", dir.display());
    }
    Ok(pages)
}

/// The unit with `ExecStart` pointing at `bin`.
fn unit_for(bin: &Path) -> Result<String> {
    let text = fs::read_to_string(root().join(UNIT))?;
    if !text.contains(PACKAGED_BIN) {
        bail!("{UNIT} no longer runs {PACKAGED_BIN}: update xtask/src/package.rs");
    }
    Ok(text.replace(PACKAGED_BIN, &bin.display().to_string()))
}

/// The version cargo gives tracer.
fn version() -> Result<String> {
    let out = output(Command::new(tracer_bin()).arg("--version"))?;
    out.split_whitespace().nth(1).map(str::to_owned).context("`tracer --version` printed no version")
}

/// Builds `target/debian/tracer_VERSION_ARCH.deb`; returns its path.
pub(crate) fn deb() -> Result<PathBuf> {
    build_tracer()?;
    let version = version()?;
    let arch = output(Command::new("dpkg").arg("--print-architecture"))?.trim().to_owned();
    let out = root().join("target/debian");
    let tree = out.join("tree");
    drop(fs::remove_dir_all(&tree));
    let put = |rel: &str, bytes: &[u8], mode: u32| -> Result<()> {
        let path = tree.join(rel);
        fs::create_dir_all(path.parent().context("a packaged file has a directory")?)?;
        fs::write(&path, bytes)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    put("usr/bin/tracer", &fs::read(tracer_bin())?, 0o755)?;
    put(&format!("lib/systemd/system/{UNIT_NAME}"), unit_for(Path::new(PACKAGED_BIN))?.as_bytes(), 0o644)?;
    let man = tree.join("usr/share/man/man1");
    for page in man_pages(&man)? {
        fs::set_permissions(&page, fs::Permissions::from_mode(0o644))?;
        run(Command::new("gzip").args(["-9nf"]).arg(page))?;
    }
    put("usr/share/doc/tracer/copyright", copyright().as_bytes(), 0o644)?;
    put("usr/share/doc/tracer/README.md", &fs::read(root().join("README.md"))?, 0o644)?;
    let depends = shlib_depends(&tree.join("usr/bin/tracer"))?;
    let control = format!(
        "Package: tracer\n\
         Version: {version}\n\
         Architecture: {arch}\n\
         Maintainer: tracer developers <tracer@localhost>\n\
         Depends: {depends}\n\
         Section: devel\n\
         Priority: optional\n\
         Description: shows which GPU kernels an inference runtime really dispatches\n \
         tracer observes unmodified processes (Ollama, llama.cpp, PyTorch) with eBPF uprobes on the GPU\n \
         runtimes they map (HIP and HSA on AMD ROCm, the CUDA driver and runtime) and records their kernel\n \
         launches, queue dispatches, library calls and inference phases. It needs no ROCm or CUDA of its\n \
         own: it probes the copies the traced processes map. Recording needs root and a kernel with BTF.\n"
    );
    put("DEBIAN/control", control.as_bytes(), 0o644)?;
    put("DEBIAN/md5sums", md5sums(&tree)?.as_bytes(), 0o644)?;
    let deb = out.join(format!("tracer_{version}_{arch}.deb"));
    step(&format!("dpkg-deb --build -> {}", deb.display()));
    run(Command::new("dpkg-deb").args(["--root-owner-group", "-Zxz", "--build"]).arg(&tree).arg(&deb))?;
    Ok(deb)
}

/// `DEBIAN/md5sums`: each packaged file's MD5 and path (what `dpkg --verify` checks an install against), by
/// coreutils' `md5sum` over the tree's files outside `DEBIAN/`.
fn md5sums(tree: &Path) -> Result<String> {
    let mut files = Vec::new();
    let mut dirs = vec![PathBuf::new()];
    while let Some(rel) = dirs.pop() {
        for entry in fs::read_dir(tree.join(&rel))? {
            let entry = entry?;
            let path = rel.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                if path != Path::new("DEBIAN") {
                    dirs.push(path);
                }
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    output(Command::new("md5sum").current_dir(tree).args(&files))
}

/// The shared libraries the binary needs, as Debian dependencies (`dpkg-shlibdeps`).
fn shlib_depends(bin: &Path) -> Result<String> {
    // dpkg-shlibdeps reads debian/control from its working directory: an empty source package.
    let work = root().join("target/debian/shlibdeps");
    fs::create_dir_all(work.join("debian"))?;
    fs::write(work.join("debian/control"), "Source: tracer\n\nPackage: tracer\nArchitecture: any\n")?;
    let out = output(Command::new("dpkg-shlibdeps").current_dir(&work).arg("-O").arg("-e").arg(bin))?;
    out.lines()
        .find_map(|l| l.strip_prefix("shlibs:Depends="))
        .map(str::to_owned)
        .context("dpkg-shlibdeps gave no shlibs:Depends line")
}

fn copyright() -> String {
    "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
     Upstream-Name: tracer\n\n\
     Files: *\n\
     License: MIT or Apache-2.0\n"
        .to_owned()
}

/// Installs the binary, the man pages and the unit under `prefix` (`/usr/local` by default): PREFIX/bin/tracer,
/// PREFIX/share/man/man1/tracer*.1, PREFIX/lib/systemd/system/tracer-ollama.service (a path systemd reads
/// units from), its `ExecStart` naming the installed binary.
pub(crate) fn install(prefix: &Path) -> Result<()> {
    build_tracer()?;
    let bin = prefix.join("bin/tracer");
    let unit = prefix.join("lib/systemd/system").join(UNIT_NAME);
    let pages = man_pages(&root().join("target/man"))?;
    let mut files = vec![(bin.clone(), fs::read(tracer_bin())?, 0o755), (unit, unit_for(&bin)?.into_bytes(), 0o644)];
    for page in pages {
        let name = page.file_name().context("a man page has a name")?;
        files.push((prefix.join("share/man/man1").join(name), fs::read(&page)?, 0o644));
    }
    for (path, bytes, mode) in files {
        let dir = path.parent().context("an installed file has a directory")?;
        fs::create_dir_all(dir).with_context(|| format!("cannot create {} (run as root?)", dir.display()))?;
        // Written beside and renamed: a running tracer keeps its old binary.
        let part = path.with_extension("part");
        fs::write(&part, bytes).with_context(|| format!("cannot write {} (run as root?)", part.display()))?;
        fs::set_permissions(&part, fs::Permissions::from_mode(mode))?;
        fs::rename(&part, &path)?;
        step(&format!("installed {}", path.display()));
    }
    step(&format!(
        "tracer is installed: run `sudo {} record --help`; as a service beside Ollama: `systemctl daemon-reload && systemctl enable --now {UNIT_NAME}`",
        bin.display()
    ));
    Ok(())
}
