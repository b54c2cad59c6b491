//! Readiness: the moment the probes are live, said to whoever waits for it, with `-q` too.
//!
//! A script that starts tracer and then sends work must not send it before the probes are attached, and a
//! service manager must not start what depends on tracer before then. Two signals, both sent once the
//! set-up is complete and the command (if any) is resumed:
//! - `--ready-file PATH`: a file that appears whole (written beside, then renamed) holding `pid=`, `trace=`
//!   and, when served, `metrics=` lines; removed when the recording stops;
//! - systemd's notify protocol (`Type=notify`): `READY=1` with a `STATUS=` line, and `STOPPING=1` at the stop.
//!   Nothing is sent where `NOTIFY_SOCKET` is unset.

use crate::os::messages::warning;
use std::{
    io::Write as _,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};

/// Checked before anything is attached: the file's directory exists and the path is no directory.
pub(in crate::record) fn check(path: &Path) -> Result<()> {
    if !crate::os::output::dir_of(path).is_dir() {
        bail!("the directory of --ready-file {} does not exist: create it or choose another path", path.display());
    }
    if path.is_dir() {
        bail!("--ready-file {} is a directory: give a file's path", path.display());
    }
    Ok(())
}

/// The live recording's readiness, withdrawn when dropped.
pub(in crate::record) struct Ready {
    file: Option<PathBuf>,
}

impl Ready {
    /// Says the probes are live: `facts` are (key, value) lines of the file; `status` is systemd's line.
    ///
    /// A file that cannot be written (another user planted a directory at its path) is said on stderr, and
    /// the recording goes on: the probes are live, and a recording is never given up for its announcement.
    pub(in crate::record) fn announce(file: Option<&Path>, facts: &[(&str, String)], status: &str) -> Self {
        let written = file.filter(|path| {
            let text = facts.iter().fold(String::new(), |mut t, (k, v)| {
                t.push_str(k);
                t.push('=');
                t.push_str(v);
                t.push('\n');
                t
            });
            write_whole(path, text.as_bytes())
                .with_context(|| format!("cannot write the --ready-file {}", path.display()))
                .map_err(|e| warning!("{e:#}; the recording goes on"))
                .is_ok()
        });
        notify(Some(status.to_owned()));
        Self { file: written.map(Path::to_path_buf) }
    }
}

/// How long a notification may take: a socket whose reader never reads (any process of the service may
/// hold `NOTIFY_SOCKET`'s path) blocks the send, and the recording must go on, and stop when asked.
const NOTIFY_TIME: Duration = Duration::from_secs(1);

/// Tells the service manager (when `NOTIFY_SOCKET` names one) that the recording is ready, with its `status`,
/// or (None) that it is stopping, waiting [`NOTIFY_TIME`] at most: the send runs on a thread of its own,
/// left behind if it blocks. Best effort: a manager that went away, or does not read, cannot be told, and
/// the recording goes on.
fn notify(status: Option<String>) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    let (sent, done) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().name("tracer-notify".into()).spawn(move || {
        use sd_notify::NotifyState;
        let states = match &status {
            Some(status) => vec![NotifyState::Ready, NotifyState::Status(status)],
            None => vec![NotifyState::Stopping],
        };
        drop(sd_notify::notify(&states));
        // Err: the caller stopped waiting; nothing to tell it.
        let _late = sent.send(());
    });
    if spawned.is_ok() && done.recv_timeout(NOTIFY_TIME).is_err() {
        warning!("the service manager's notify socket did not take a notification within 1 s");
    }
}

impl Drop for Ready {
    fn drop(&mut self) {
        notify(None);
        if let Some(path) = &self.file {
            drop(std::fs::remove_file(path));
        }
    }
}

/// Writes `bytes` under a temporary name beside `path` (created new, never through a link) and renames it
/// over `path`: a reader sees no file or the whole file.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = crate::os::output::staged_name(path)?;
    drop(std::fs::remove_file(&tmp));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| drop(std::fs::remove_file(&tmp)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_appears_whole_and_goes_at_the_stop() {
        let dir = std::env::temp_dir().join(format!("tracer-ready-{}", std::process::id()));
        drop(std::fs::remove_dir_all(&dir));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ready");
        check(&path).unwrap();
        // A stale file from an earlier run is replaced.
        std::fs::write(&path, "stale").unwrap();
        let ready = Ready::announce(Some(&path), &[("pid", "7".into()), ("trace", "t.jsonl".into())], "x");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "pid=7\ntrace=t.jsonl\n");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file is left");
        drop(ready);
        assert!(!path.exists());
        check(&dir).unwrap_err();
        check(&dir.join("missing/ready")).unwrap_err();
        // A directory planted at the path after the check: said, never an error, and left alone at the stop.
        std::fs::create_dir_all(dir.join("planted")).unwrap();
        let ready = Ready::announce(Some(&dir.join("planted")), &[("pid", "7".into())], "x");
        assert!(ready.file.is_none());
        drop(ready);
        assert!(dir.join("planted").is_dir());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file is left");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
