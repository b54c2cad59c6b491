//! Ollama's installation as the recording finds it: the servers running, the runtime copies a server
//! bundles, and which model a runner serves (the `name:tag` when its `--model` path is a blob of the models
//! directory). What a process is to Ollama (server, runner, other) is the trace's knowledge, beside the role
//! a process record carries: [`crate::trace::ollama_part`].

use std::{
    fs,
    path::{Path, PathBuf},
};

use crate::{
    os::{basename, files::Root, proc::Procs},
    trace::{OllamaPart, ollama_part},
};

/// The models directory: `--models-dir`, else `OLLAMA_MODELS`, else `~/.ollama/models`.
pub(crate) fn models_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("OLLAMA_MODELS") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ollama/models"))
}

/// `name:tag` for a model blob path (`.../blobs/sha256-<hex>`), from the manifest that lists it as a
/// layer. Names in the default namespace of the default registry are shown short (`llama3.2:1b`).
pub(crate) fn model_label(model_path: &str, models: &Path) -> Option<String> {
    let file = basename(model_path);
    let hex = file.strip_prefix("sha256-").or_else(|| file.strip_prefix("sha256:"))?;
    let digest = format!("sha256:{hex}");
    let manifests = models.join("manifests");
    let mut found = None;
    walk(&manifests, 0, &mut |path| {
        if found.is_some() {
            return;
        }
        // A manifest is a small JSON file: read as any file a user can place (a regular file, bounded).
        let Ok(file) = crate::os::files::CodeFile::user(path) else { return };
        let Ok(text) = file.read_vec(0, file.len(), MAX_MANIFEST, "a manifest") else { return };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text) else { return };
        let listed = v["layers"].as_array().is_some_and(|ls| ls.iter().any(|l| l["digest"] == digest.as_str()));
        if listed && let Ok(rel) = path.strip_prefix(&manifests) {
            found = Some(label_from_manifest_path(rel));
        }
    });
    found
}

/// `registry/namespace/name/tag` → the name Ollama shows.
fn label_from_manifest_path(rel: &Path) -> String {
    let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    match parts.as_slice() {
        [registry, ns, name, tag] if registry == "registry.ollama.ai" && ns == "library" => format!("{name}:{tag}"),
        [registry, ns, name, tag] if registry == "registry.ollama.ai" => format!("{ns}/{name}:{tag}"),
        [registry, ns, name, tag] => format!("{registry}/{ns}/{name}:{tag}"),
        other => other.join("/"),
    }
}

/// Largest manifest read.
const MAX_MANIFEST: u64 = 1 << 20;

fn walk(dir: &Path, depth: usize, f: &mut impl FnMut(&Path)) {
    if depth > 6 {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths.into_iter().take(crate::os::files::MAX_DIR_ENTRIES) {
        // Links are not followed: a manifest tree holds directories and files.
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => walk(&p, depth + 1, f),
            Ok(m) if m.file_type().is_symlink() => {}
            Ok(_) => f(&p),
            Err(_) => {}
        }
    }
}

/// Processes whose argv is `ollama serve`, less their children: a child the server has forked shows the
/// server's argv until it execs its runner.
pub(crate) fn find_servers(procs: &dyn Procs) -> Vec<u32> {
    let mut pids: Vec<u32> =
        procs.pids().into_iter().filter(|&pid| ollama_part(&procs.argv(pid)) == OllamaPart::Server).collect();
    pids.sort_unstable();
    let parent_is_server = |pid: u32| procs.stat(pid).is_some_and(|s| pids.binary_search(&s.ppid).is_ok());
    let children: Vec<u32> = pids.iter().copied().filter(|&p| parent_is_server(p)).collect();
    pids.retain(|p| !children.contains(p));
    pids
}

/// Library directories of an Ollama install, from the server's executable.
///
/// `<exe>/../lib/ollama` and its subdirectories (`rocm`, `cuda_v12`, ...), as the server sees them (a
/// server in a container has its own root), as a tree nothing read may leave: a link out of it (to
/// `/etc/shadow`, or a user's copy elsewhere) is not followed.
pub(crate) fn bundle_dirs(procs: &dyn Procs, server: u32) -> Option<(Root, Vec<String>)> {
    let exe = procs.exe(server)?;
    let prefix = exe.parent().and_then(Path::parent)?;
    let lib = format!("{}/lib/ollama", prefix.display().to_string().trim_end_matches('/'));
    let tree = Root::of(server).ok()?.beneath(&lib).ok()?;
    let mut subs: Vec<String> = tree.list(".").ok()?;
    subs.sort();
    let mut dirs = vec![".".to_owned()];
    dirs.extend(subs.into_iter().filter(|s| tree.list(s).is_ok()));
    Some((tree, dirs))
}

/// The copies of a runtime in a server's bundle directories, opened beneath its install tree.
pub(crate) fn bundle_copies(server: u32, runtime: &str) -> Vec<crate::record::probes::libs::LibCopy> {
    let Some((tree, dirs)) = bundle_dirs(&crate::os::proc::LIVE, server) else { return Vec::new() };
    dirs.iter().flat_map(|dir| crate::record::probes::libs::in_dir(&tree, dir, runtime)).collect()
}

/// Whether a process's executable is a file named `ollama` owned by root or by `user` (a uid): what
/// `--ollama` requires of an `ollama serve` it finds before it reads that server's bundle or probes its
/// copies. Its argv says nothing (`exec -a ollama /usr/bin/python3 serve` shows `ollama serve`, and root owns
/// python3), so the name is the executable's own.
pub(crate) fn trusted_server(pid: u32, user: Option<u32>) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let exe = format!("/proc/{pid}/exe");
    let meta = fs::metadata(&exe).map_err(|e| format!("its executable cannot be looked at ({e})"))?;
    let path = fs::read_link(&exe).map_or_else(|_| exe.clone(), |p| p.display().to_string());
    // An executable replaced on disk (an upgrade) while the server runs reads as `... (deleted)`.
    if basename(path.strip_suffix(" (deleted)").unwrap_or(&path)) != "ollama" {
        return Err(format!(
            "its executable is {path}, not a file named ollama (a process's argv is whatever its user makes it)"
        ));
    }
    if meta.uid() == 0 || Some(meta.uid()) == user {
        Ok(())
    } else {
        Err(format!(
            "its executable {path} is owned by uid {}, not root{}",
            meta.uid(),
            user.map(|u| format!(" or uid {u}")).unwrap_or_default()
        ))
    }
}

/// The uid of a user name (from /etc/passwd) or a number.
pub fn uid_of(user: &str) -> Option<u32> {
    if let Ok(n) = user.parse() {
        return Some(n);
    }
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == user).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    /// Two servers (one in a container), a child the first has forked and not yet exec'd (it still
    /// shows `ollama serve`), a runner and a client command.
    struct Tree;

    impl Procs for Tree {
        fn stat(&self, pid: u32) -> Option<crate::os::proc::Stat> {
            let ppid = match pid {
                10 | 30 | 50 => 1,
                11 | 12 => 10,
                _ => return None,
            };
            Some(crate::os::proc::Stat { ppid, start_time: 1, comm: "ollama".into() })
        }
        fn argv(&self, pid: u32) -> Vec<String> {
            argv(match pid {
                10 | 11 => "/usr/bin/ollama serve",
                12 => "/usr/bin/ollama runner --model /m",
                30 => "ollama serve",
                50 => "ollama list",
                _ => "",
            })
        }
        fn maps(&self, _pid: u32) -> Option<Vec<crate::os::proc::MapsEntry>> {
            None
        }
        fn pids(&self) -> Vec<u32> {
            vec![10, 11, 12, 30, 50]
        }
        fn exe(&self, _pid: u32) -> Option<PathBuf> {
            None
        }
        fn fd_target(&self, _pid: u32, _fd: u32) -> Option<String> {
            None
        }
        fn same_mount_ns(&self, _pid: u32) -> bool {
            true
        }
    }

    #[test]
    fn servers_are_not_their_forked_children() {
        assert_eq!(find_servers(&Tree), vec![10, 30]);
    }

    #[test]
    fn labels_blobs_from_manifests() {
        let dir = std::env::temp_dir().join(format!("tracer-ollama-test-{}", std::process::id()));
        let m = dir.join("manifests/registry.ollama.ai/library/llama3.2");
        fs::create_dir_all(&m).unwrap();
        fs::write(
            m.join("1b"),
            r#"{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:abc123","size":1}]}"#,
        )
        .unwrap();
        let other = dir.join("manifests/registry.ollama.ai/someone/tiny");
        fs::create_dir_all(&other).unwrap();
        fs::write(other.join("latest"), r#"{"layers":[{"digest":"sha256:def456"}]}"#).unwrap();
        assert_eq!(model_label("/x/blobs/sha256-abc123", &dir).as_deref(), Some("llama3.2:1b"));
        assert_eq!(model_label("/x/blobs/sha256-def456", &dir).as_deref(), Some("someone/tiny:latest"));
        assert_eq!(model_label("/x/blobs/sha256-999", &dir), None);
        assert_eq!(model_label("/x/model.gguf", &dir), None);
        drop(fs::remove_dir_all(&dir));
    }
}
