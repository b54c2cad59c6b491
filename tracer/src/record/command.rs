//! The command a recording starts (`tracer record -- COMMAND ARGS`): forked, stopped before it execs so
//! its PID joins the filter before its first instruction, then resumed. The process is the command
//! itself (no wrapper shell), so it is recorded under its own argv, and its exit status is tracer's.

use std::{ffi::CString, os::unix::ffi::OsStrExt as _, path::PathBuf};

use anyhow::{Result, anyhow, bail};

/// How the started command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    Exited(i32),
    Killed(i32),
}

impl Ended {
    /// The shell's convention: the exit code, or 128 + the signal's number.
    pub(super) const fn status(self) -> u8 {
        match self {
            Self::Exited(code) => code as u8,
            Self::Killed(sig) => 128u8.wrapping_add(sig as u8),
        }
    }

    const fn from_wait_status(status: libc::c_int) -> Option<Self> {
        if libc::WIFEXITED(status) {
            Some(Self::Exited(libc::WEXITSTATUS(status)))
        } else if libc::WIFSIGNALED(status) {
            Some(Self::Killed(libc::WTERMSIG(status)))
        } else {
            None
        }
    }
}

/// A started command, stopped until [`Command::resume`].
#[derive(Debug)]
pub(super) struct Command {
    pub(super) pid: u32,
    ended: Option<Ended>,
}

/// The program a command names: a path as given, or the first executable of that name on PATH.
fn resolve(program: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let executable =
        |p: &std::path::Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let p = PathBuf::from(program);
        if !p.exists() {
            bail!("{program} does not exist: give the path of a program to run after --");
        }
        if !executable(&p) {
            bail!("{program} is not an executable file: give a program to run after --");
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| executable(p))
        .ok_or_else(|| anyhow!("{program}: command not found on PATH: give its path after --"))
}

impl Command {
    /// Forks, stops the child before it execs `command`, and waits until it has stopped.
    pub(super) fn start_stopped(command: &[String]) -> Result<Self> {
        let program = command.first().ok_or_else(|| anyhow!("no command given after --"))?;
        let path = CString::new(resolve(program)?.as_os_str().as_bytes())?;
        let argv: Vec<CString> = command.iter().map(|a| CString::new(a.as_bytes())).collect::<Result<_, _>>()?;
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        // SAFETY: fork in a process whose only thread is this one (the recording's runtime runs on it); the
        // child calls only async-signal-safe functions (raise, execv, _exit) on memory prepared before.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            bail!("cannot start {program} ({})", std::io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above; the argument vector is NUL-terminated and outlives the call.
            unsafe {
                libc::raise(libc::SIGSTOP);
                libc::execv(path.as_ptr(), argv_ptrs.as_ptr());
                libc::_exit(127);
            }
        }
        let mut status = 0;
        // SAFETY: waiting for our own child with a valid status pointer.
        let rc = unsafe { libc::waitpid(pid, &raw mut status, libc::WUNTRACED) };
        if rc != pid || !libc::WIFSTOPPED(status) {
            bail!("{program} did not start (its process ended before it could be traced)");
        }
        Ok(Self { pid: pid as u32, ended: None })
    }

    pub(super) fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    pub(super) fn signal(&self, sig: libc::c_int) {
        if self.ended.is_none() {
            // SAFETY: signalling our own child, which has not been reaped (its PID is still ours).
            unsafe {
                libc::kill(self.pid as libc::pid_t, sig);
            }
        }
    }

    /// How the command ended, if it has (without waiting).
    pub(super) fn try_wait(&mut self) -> Option<Ended> {
        if self.ended.is_none() {
            let mut status = 0;
            // SAFETY: our own child, a valid status pointer, no blocking.
            let rc = unsafe { libc::waitpid(self.pid as libc::pid_t, &raw mut status, libc::WNOHANG) };
            if rc == self.pid as libc::pid_t {
                self.ended = Ended::from_wait_status(status);
            }
        }
        self.ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_follow_the_shell() {
        assert_eq!(Ended::Exited(3).status(), 3);
        assert_eq!(Ended::Killed(libc::SIGSEGV).status(), 139);
        assert_eq!(Ended::Killed(libc::SIGTERM).status(), 143);
    }

    #[test]
    fn commands_are_resolved_or_refused_in_one_sentence() {
        assert!(resolve("sh").unwrap().is_absolute());
        assert!(resolve("/nonexistent/cmd").unwrap_err().to_string().contains("does not exist"));
        assert!(resolve("no-such-command-here").unwrap_err().to_string().contains("not found on PATH"));
        let plain = std::env::temp_dir().join(format!("tracer-not-executable-{}", std::process::id()));
        std::fs::write(&plain, "data").unwrap();
        assert!(resolve(plain.to_str().unwrap()).unwrap_err().to_string().contains("not an executable"));
        drop(std::fs::remove_file(&plain));
    }
}
