//! Where everything the fixtures and the tests use comes from: every header a fixture includes, every
//! library it links and every program a test runs must belong to a Debian package that `cargo xtask setup`
//! installs (one it names, or one those depend on, or an essential package every Debian system has), or to
//! the Rust toolchain the README asks for.
//!
//! A package installed by hand on a machine that runs CI hides a missing install step: the tests pass there
//! and fail on a fresh machine (rocSPARSE's headers did). This check reads what is really used (the
//! compilers' own dependency lists, the linker's search, the tests' sources) and asks dpkg who owns each
//! file, so it fails on the machine that has the package too. It also proves each run that it can fail: the
//! same files checked against setup's list without librocsparse-dev must name rocsparse.h.

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};

use crate::{PACKAGES, fixtures::FIXTURE_LIBS, output, root, step};

/// A file in use and why: "`fixtures/hip/sparse_rand.hip` includes", "the tests run", ...
struct Used {
    path: PathBuf,
    by: String,
}

/// Runs the check: an error naming each file that setup would not install, and the package to add.
pub(crate) fn check() -> Result<()> {
    let used = used_files()?;
    let installed = installed_packages()?;
    let owners = owners(&used)?;
    let found = problems(&used, &owners, &closure(&installed, PACKAGES));
    // The check must be able to fail: without the package whose absence broke fresh machines before, it
    // must name the header that package brings.
    let without_rocsparse: Vec<&str> = PACKAGES.iter().copied().filter(|p| *p != "librocsparse-dev").collect();
    let knocked_out = closure(&installed, &without_rocsparse);
    let without = problems(&used, &owners, &knocked_out);
    if !without.iter().any(|p| p.contains("rocsparse.h")) {
        bail!(
            "the provenance check cannot see a missing package: without librocsparse-dev it found {} problem(s), none naming rocsparse.h",
            without.len()
        );
    }
    if !found.is_empty() {
        bail!(
            "{} file(s) the fixtures or tests use come from outside what `cargo xtask setup` installs (a fresh machine would lack them):\n  {}",
            found.len(),
            found.join("\n  ")
        );
    }
    step(&format!(
        "provenance: {} files the fixtures and tests use all come from setup's packages or the Rust toolchain (and without librocsparse-dev the check fails, as it must: {} problem(s))",
        used.len(),
        without.len()
    ));
    Ok(())
}

/// What `fixtures/kmod/guest.sh` runs on the host to boot the GPU scheduler and null GPU tests' kernel: qemu, the
/// guest's busybox, the kernel's own compiler for the driver test doubles, the tools that unpack Debian's kernel;
/// and what `fixtures/kmod/null_gpu_root.sh` runs to copy the null GPU's user space (chroot, for the root's own
/// ldd) and build its `hip_device_count` (gcc).
const GUEST_PROGRAMS: [&str; 10] =
    ["qemu-system-x86_64", "busybox", "gcc-12", "make", "xz", "depmod", "dpkg-deb", "apt-get", "chroot", "gcc"];

/// Headers and libraries of every fixture, and the programs the tests and xtask run.
fn used_files() -> Result<Vec<Used>> {
    let root = root();
    let mut used = Vec::new();
    let mut sources = Vec::new();
    for dir in ["fixtures/hip", "fixtures/c", "fixtures/hsa_double", "fixtures/cuda_double", "fixtures/vulkan"] {
        for entry in fs::read_dir(root.join(dir))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "hip" || e == "c") {
                sources.push(path);
            }
        }
    }
    sources.sort();
    for src in &sources {
        let hip = src.extension().is_some_and(|e| e == "hip");
        let mut cmd = if hip { Command::new("hipcc") } else { Command::new("cc") };
        if hip {
            cmd.arg("--offload-arch=gfx1030");
        }
        let deps = output(cmd.arg("-M").arg(src))?;
        let rel = src.strip_prefix(&root).unwrap_or(src).display().to_string();
        for header in make_deps(&deps) {
            let path = PathBuf::from(header);
            if !path.starts_with(&root) {
                used.push(Used { path, by: format!("{rel} includes") });
            }
        }
    }
    // hipcc links the HIP runtime itself; the rest are the fixtures' own -l flags.
    let mut libs = vec![("hipcc", "-lamdhip64"), ("vk_runner", "-lvulkan")];
    for (fixture, flags) in FIXTURE_LIBS {
        libs.extend(flags.iter().map(|f| (*fixture, *f)));
    }
    for (fixture, flag) in libs {
        let name = flag.trim_start_matches("-l");
        let found = output(Command::new("cc").arg(format!("-print-file-name=lib{name}.so")))?;
        let path = PathBuf::from(found.trim());
        if !path.is_absolute() {
            bail!("{fixture} links {flag}, but no lib{name}.so is on the linker's path: run `cargo xtask setup`");
        }
        used.push(Used { path, by: format!("{fixture} links") });
    }
    for program in GUEST_PROGRAMS {
        let path = which(program)
            .with_context(|| format!("fixtures/kmod/guest.sh runs `{program}`, which is not installed"))?;
        used.push(Used { path, by: "fixtures/kmod/guest.sh runs".to_owned() });
    }
    for program in programs_run(&root)? {
        let path = which(&program).with_context(|| format!("the tests run `{program}`, which is not installed"))?;
        used.push(Used { path, by: "the tests run".to_owned() });
    }
    Ok(used)
}

/// The paths of a make-style dependency list (`cc -M`): every word after the target, line continuations
/// joined. hipcc writes one list per offload target; duplicates are dropped.
fn make_deps(text: &str) -> BTreeSet<String> {
    let joined = text.replace("\\\n", " ");
    joined
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(_, deps)| deps))
        .flat_map(str::split_whitespace)
        .filter(|w| w.starts_with('/'))
        .map(str::to_owned)
        .collect()
}

/// Programs named as `Command::new("NAME")` in the tests and xtask (not the Rust toolchain's; not this
/// file, whose examples name programs).
fn programs_run(root: &Path) -> Result<BTreeSet<String>> {
    let mut files = Vec::new();
    let mut dirs = vec![root.join("tests"), root.join("xtask/src")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("xtask/src/provenance.rs") {
                files.push(path);
            }
        }
    }
    let mut programs = BTreeSet::new();
    for file in files {
        programs.extend(commands_in(&fs::read_to_string(&file)?));
    }
    for toolchain in ["cargo", "rustc", "rustup"] {
        programs.remove(toolchain);
    }
    Ok(programs)
}

/// The string literals given to `Command::new` in Rust source.
fn commands_in(source: &str) -> Vec<String> {
    source
        .split("Command::new(\"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name.to_owned()))
        .filter(|name| !name.is_empty())
        .collect()
}

fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program)).filter(|p| p.exists());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

/// An installed package's name, whether it is essential, and its dependencies: alternatives grouped.
#[derive(Default)]
struct Package {
    essential: bool,
    depends: Vec<Vec<String>>,
    provides: Vec<String>,
}

fn installed_packages() -> Result<BTreeMap<String, Package>> {
    let text =
        output(Command::new("dpkg-query").args([
            "-W",
            "-f=${db:Status-Abbrev}\t${Package}\t${Essential}\t${Pre-Depends}, ${Depends}\t${Provides}\n",
        ]))?;
    Ok(parse_installed(&text))
}

/// dpkg-query's lines: installed packages only (status `ii`).
fn parse_installed(text: &str) -> BTreeMap<String, Package> {
    let names = |field: &str| -> Vec<Vec<String>> {
        field
            .split(',')
            .map(|group| {
                group
                    .split('|')
                    .filter_map(|alt| alt.split_whitespace().next())
                    .map(|n| n.split(':').next().unwrap_or(n).to_owned())
                    .collect::<Vec<_>>()
            })
            .filter(|g| !g.is_empty())
            .collect()
    };
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            let [status, name, essential, depends, provides] = f[..] else { return None };
            status.starts_with("ii").then(|| {
                let pkg = Package {
                    essential: essential == "yes",
                    depends: names(depends),
                    provides: names(provides).into_iter().flatten().collect(),
                };
                (name.to_owned(), pkg)
            })
        })
        .collect()
}

/// What installing `named` brings: those packages, every installed package they depend on (through
/// alternatives and virtual packages), and the essential packages every Debian system has.
fn closure(installed: &BTreeMap<String, Package>, named: &[&str]) -> BTreeSet<String> {
    let mut providers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, p) in installed {
        providers.entry(name).or_default().push(name);
        for v in &p.provides {
            providers.entry(v).or_default().push(name);
        }
    }
    let mut seen = BTreeSet::new();
    let mut queue: VecDeque<String> = named.iter().map(|n| (*n).to_owned()).collect();
    queue.extend(installed.iter().filter(|(_, p)| p.essential).map(|(n, _)| n.clone()));
    while let Some(name) = queue.pop_front() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(p) = installed.get(&name) else { continue };
        for group in &p.depends {
            for alt in group {
                for real in providers.get(alt.as_str()).into_iter().flatten() {
                    queue.push_back((*real).to_owned());
                }
            }
        }
    }
    seen
}

/// The package owning each used file, by `dpkg -S` (None: no package). Debian 12 has merged /usr, while
/// dpkg keeps some files under /lib or /bin: both spellings are asked.
fn owners(used: &[Used]) -> Result<BTreeMap<PathBuf, Option<String>>> {
    let mut out = BTreeMap::new();
    for u in used {
        if out.contains_key(&u.path) {
            continue;
        }
        out.insert(u.path.clone(), owner(&u.path)?);
    }
    Ok(out)
}

fn owner(path: &Path) -> Result<Option<String>> {
    let mut candidates = vec![path.to_path_buf()];
    if let Ok(real) = fs::canonicalize(path) {
        candidates.push(real);
    }
    for c in candidates.clone() {
        let s = c.display().to_string();
        if let Some(rest) = s.strip_prefix("/usr/") {
            candidates.push(PathBuf::from(format!("/{rest}")));
        } else {
            candidates.push(PathBuf::from(format!("/usr{s}")));
        }
    }
    for c in candidates {
        let o = Command::new("dpkg").arg("-S").arg(&c).output().context("cannot run dpkg -S")?;
        if o.status.success() {
            let text = String::from_utf8_lossy(&o.stdout);
            // "pkg1, pkg2:amd64: /path": the owners before the last ": " ("diversion by PKG from/to: ..." lines
            // say who diverted a file, not who owns it).
            let owned = text.lines().find(|l| !l.starts_with("diversion by "));
            if let Some((pkgs, _)) = owned.and_then(|l| l.rsplit_once(": ")) {
                let first = pkgs.split(", ").next().unwrap_or(pkgs);
                return Ok(Some(first.split(':').next().unwrap_or(first).to_owned()));
            }
        }
    }
    Ok(None)
}

/// One sentence per file that `have` does not cover. Files of the Rust toolchain (rustup's homes) are the
/// README's own requirement.
fn problems(used: &[Used], owners: &BTreeMap<PathBuf, Option<String>>, have: &BTreeSet<String>) -> Vec<String> {
    let toolchain = [crate::cargo_home(), rustup_home()];
    let mut out = Vec::new();
    for u in used {
        if toolchain.iter().any(|t| u.path.starts_with(t)) {
            continue;
        }
        match owners.get(&u.path).cloned().flatten() {
            Some(pkg) if have.contains(&pkg) => {}
            Some(pkg) => out.push(format!(
                "{} {} from the package {pkg}, which setup does not install: add {pkg} to PACKAGES in xtask/src/main.rs",
                u.by,
                u.path.display()
            )),
            None => out.push(format!(
                "{} {}, which no Debian package installed: it was put there by hand",
                u.by,
                u.path.display()
            )),
        }
    }
    out.sort();
    out.dedup();
    out
}

fn rustup_home() -> PathBuf {
    std::env::var_os("RUSTUP_HOME").map_or_else(|| crate::home().join(".rustup"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_make_dependency_list_gives_every_header() {
        let deps =
            "x.o: /src/x.c /usr/include/stdio.h \\\n /usr/include/rocsparse/rocsparse.h\ny.o: /usr/include/stdio.h\n";
        let got: Vec<String> = make_deps(deps).into_iter().collect();
        assert_eq!(got, ["/src/x.c", "/usr/include/rocsparse/rocsparse.h", "/usr/include/stdio.h"]);
    }

    #[test]
    fn commands_are_read_from_source() {
        let src = r#"let a = Command::new("bpftrace"); Command::new(tracer_bin()); Command::new("/bin/sleep")"#;
        assert_eq!(commands_in(src), ["bpftrace", "/bin/sleep"]);
    }

    #[test]
    fn the_closure_follows_dependencies_alternatives_and_virtual_packages_but_not_others() {
        let text = "ii \thipdev\tno\t, libc6 (>= 2.34), awk | mawk\t\n\
                    ii \tlibc6\tno\t, \t\n\
                    ii \tgawk\tno\t, \tawk\n\
                    ii \tdash\tyes\t, \t\n\
                    ii \tlibrocsparse-dev\tno\t, \t\n\
                    rc \tgone\tno\t, \t\n";
        let installed = parse_installed(text);
        assert!(!installed.contains_key("gone"));
        let have = closure(&installed, &["hipdev"]);
        let want: BTreeSet<String> = ["hipdev", "libc6", "gawk", "dash"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(have, want);
        let used = [Used { path: "/usr/include/rocsparse/rocsparse.h".into(), by: "x.hip includes".into() }];
        let owners = std::iter::once((used[0].path.clone(), Some("librocsparse-dev".to_owned()))).collect();
        let found = problems(&used, &owners, &have);
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("add librocsparse-dev"), "{found:?}");
    }
}
