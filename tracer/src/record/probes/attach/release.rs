//! Releasing a finished recording's probes in the background, and telling a new recording that earlier
//! releases are still under way.

/// Lets the kernel release this process's probes after it has ended, so that ending is prompt.
///
/// Each uprobe's release waits for the kernel's grace periods under a global lock: about 100 ms each,
/// one after the other, over 6 s for 60 probes, even when closed from several threads. A child forked
/// here keeps a reference to every open file (the probes' links among them) until this process has
/// ended; this process's own closes are then cheap, and the child's exit performs the releases in the
/// background. The child holds no terminal or pipe of ours (it closes standard input, output and error),
/// runs no code of ours after the fork, and ends by itself once the releases are done. It closes `close`
/// too (the metrics endpoint's listening socket, whose port must be free once this process ends).
pub(crate) fn release_in_background(close: &[libc::c_int]) {
    let mut fds: [libc::c_int; 2] = [0; 2];
    // SAFETY: a valid two-element array for pipe(2).
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return; // then this process releases them itself as it ends
    }
    let [read_end, write_end] = fds;
    // SAFETY: the child calls only async-signal-safe functions and never returns into Rust code.
    match unsafe { libc::fork() } {
        // SAFETY: in the child after fork: only async-signal-safe calls (close, setsid, prctl, read, _exit) on
        // descriptors this process owns, and `_exit` ends it without running Rust code again.
        0 => unsafe {
            for &fd in [0, 1, 2, write_end].iter().chain(close) {
                libc::close(fd);
            }
            libc::setsid();
            // Named, so that a recording started meanwhile can say why its attaching waits.
            libc::prctl(libc::PR_SET_NAME, RELEASER.as_ptr());
            // Returns when every copy of the write end is closed: when the parent has ended.
            let mut byte = 0u8;
            while libc::read(read_end, (&raw mut byte).cast(), 1) < 0 {}
            libc::_exit(0);
        },
        pid if pid > 0 => {
            // SAFETY: closing our copy of the read end; the write end stays open until this process ends.
            unsafe {
                libc::close(read_end);
            }
        }
        _ => {
            // SAFETY: closing both ends of the pipe made above.
            unsafe {
                libc::close(read_end);
                libc::close(write_end);
            }
        }
    }
}

/// The name (`comm`) of the child that releases a finished recording's probes.
const RELEASER: &std::ffi::CStr = c"tracer-release";

/// Earlier recordings whose probes the kernel is still releasing: a new recording's probes on the same
/// files wait behind them (each release waits for a grace period, about 0.1 s a probe).
pub(crate) fn releases_in_progress() -> usize {
    use crate::os::proc::{LIVE, Procs as _};
    let name = RELEASER.to_string_lossy();
    LIVE.pids().into_iter().filter(|&pid| LIVE.stat(pid).is_some_and(|s| s.comm == name)).count()
}
