//! The command a recording starts (`tracer record -- COMMAND ARGS`): forked, stopped before it execs so
//! its PID joins the filter before its first instruction, then resumed. The process is the command
//! itself (no wrapper shell), so it is recorded under its own argv, and its exit status is tracer's.

use std::{ffi::CString, os::unix::ffi::OsStrExt as _, path::PathBuf};

use anyhow::{Result, anyhow, bail};

/// How the started command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::record) enum Ended {
    Exited(i32),
    Killed(i32),
}

impl Ended {
    /// The shell's convention: the exit code, or 128 + the signal's number.
    pub(in crate::record) const fn status(self) -> u8 {
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
pub(in crate::record) struct Command {
    pub(in crate::record) pid: u32,
    ended: Option<Ended>,
    /// Where the child writes the errno of an `execv` that failed (closed by a successful exec).
    exec_error: Option<std::os::fd::OwnedFd>,
}

/// The program a command names, checked before anything is attached: a path as given, or the first
/// executable of that name on PATH; a script's interpreter (`#!`) must exist and be executable too.
pub(in crate::record) fn resolve(program: &str) -> Result<PathBuf> {
    let path = find(program)?;
    if let Some(interpreter) = interpreter(&path) {
        let shown = interpreter.display();
        if !interpreter.exists() {
            bail!(
                "{program} is a script whose interpreter {shown} does not exist: fix its #! line or run the interpreter after --"
            );
        }
        if !is_executable(&interpreter) {
            bail!("{program} is a script whose interpreter {shown} is not an executable file: fix its #! line");
        }
    }
    Ok(path)
}

fn is_executable(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The program `program` names under the search path `path` (a command an `env` wrapper runs).
pub(in crate::record) fn resolve_on(program: &str, path: Option<&str>) -> Result<PathBuf> {
    if program.contains('/') {
        return find(program);
    }
    std::env::split_paths(path.unwrap_or_default())
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
        .ok_or_else(|| anyhow!("{program}: command not found on PATH"))
}

fn find(program: &str) -> Result<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        if !p.exists() {
            bail!("{program} does not exist: give the path of a program to run after --");
        }
        if !is_executable(&p) {
            bail!("{program} is not an executable file: give a program to run after --");
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
        .ok_or_else(|| anyhow!("{program}: command not found on PATH: give its path after --"))
}

/// The interpreter a script's `#!` line names (its first word), if the file starts with one.
fn interpreter(path: &std::path::Path) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let word = String::from_utf8_lossy(line).split_whitespace().next()?.to_owned();
    Some(PathBuf::from(word))
}

impl Command {
    /// Forks, stops the child before it execs `path` with argv `command`, and waits until it has
    /// stopped. With `stdout_to_stderr`, the command's standard output is its standard error (tracer's
    /// own standard output carries the trace).
    pub(in crate::record) fn start_stopped(
        path: &std::path::Path,
        command: &[String],
        stdout_to_stderr: bool,
    ) -> Result<Self> {
        let program = command.first().ok_or_else(|| anyhow!("no command given after --"))?;
        let path = CString::new(path.as_os_str().as_bytes())?;
        let argv: Vec<CString> = command.iter().map(|a| CString::new(a.as_bytes())).collect::<Result<_, _>>()?;
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        // A failed exec writes its errno here; a successful one closes the child's end (close-on-exec).
        let (read_end, write_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|e| anyhow!("cannot start {program} ({e})"))?;
        // The open-files limit tracer was given, which the command gets back (tracer raised its own).
        let given = super::args::open_files_limit_given();
        let raw_write = {
            use std::os::fd::AsRawFd as _;
            write_end.as_raw_fd()
        };
        // SAFETY: fork in a process whose only threads wait on locks the child never takes; the child
        // calls only async-signal-safe functions (dup2, setrlimit, raise, execv, write, _exit) on memory prepared
        // before.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            bail!("cannot start {program} ({})", std::io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above; the argument vector is NUL-terminated and outlives the call.
            unsafe {
                if stdout_to_stderr {
                    libc::dup2(2, 1);
                }
                if let Some(limit) = given.as_ref() {
                    libc::setrlimit(libc::RLIMIT_NOFILE, limit);
                }
                libc::raise(libc::SIGSTOP);
                libc::execv(path.as_ptr(), argv_ptrs.as_ptr());
                let errno = *libc::__errno_location();
                libc::write(raw_write, (&raw const errno).cast(), size_of::<libc::c_int>());
                libc::_exit(127);
            }
        }
        drop(write_end);
        let mut status = 0;
        // SAFETY: waiting for our own child with a valid status pointer.
        let rc = unsafe { libc::waitpid(pid, &raw mut status, libc::WUNTRACED) };
        if rc != pid || !libc::WIFSTOPPED(status) {
            bail!("{program} did not start (its process ended before it could be traced)");
        }
        Ok(Self { pid: pid as u32, ended: None, exec_error: Some(read_end) })
    }

    /// Why the command's exec failed, once it has ended without running (None: it ran).
    pub(in crate::record) fn exec_failure(&mut self) -> Option<std::io::Error> {
        let fd = self.exec_error.take()?;
        let mut errno = [0u8; size_of::<libc::c_int>()];
        match rustix::io::read(&fd, &mut errno) {
            Ok(n) if n == errno.len() => Some(std::io::Error::from_raw_os_error(libc::c_int::from_ne_bytes(errno))),
            _ => None,
        }
    }

    pub(in crate::record) fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    pub(in crate::record) fn signal(&self, sig: libc::c_int) {
        if self.ended.is_none() {
            // SAFETY: signalling our own child, which has not been reaped (its PID is still ours).
            unsafe {
                libc::kill(self.pid as libc::pid_t, sig);
            }
        }
    }

    /// How the command ended, if it has (without waiting).
    pub(in crate::record) fn try_wait(&mut self) -> Option<Ended> {
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
        // A script whose interpreter is missing: refused before anything starts, with the reason.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::write(&plain, "#!/nonexistent/interpreter -x\necho hi\n").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = resolve(plain.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("interpreter /nonexistent/interpreter does not exist"), "{e}");
        std::fs::write(&plain, "#!/bin/sh\necho hi\n").unwrap();
        resolve(plain.to_str().unwrap()).unwrap();
        drop(std::fs::remove_file(&plain));
    }
}
