//! What would write over `tracer top`'s screen, caught: while the view is up, standard output and error
//! (tracer's own messages, and those of the command it starts, which inherits them) go into a pipe whose
//! lines the view shows in its messages pane, and standard input is `/dev/null` (the keys are the view's,
//! read from the terminal itself). At the end the descriptors are put back and the lines kept are printed.

use std::{
    collections::VecDeque,
    io::Read as _,
    os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd},
    sync::{Arc, Mutex, PoisonError, mpsc},
    time::Duration,
};

use anyhow::{Context as _, Result};

/// Lines kept; older ones are counted.
pub(crate) const MAX_LINES: usize = 200;
/// The longest line kept whole; a longer one is cut there into several.
const MAX_LINE: usize = 4096;

/// The lines caught so far.
#[derive(Default)]
pub(crate) struct Messages {
    pub(crate) lines: VecDeque<String>,
    /// Lines that came before those kept (past [`MAX_LINES`]).
    pub(crate) not_kept: u64,
    partial: Vec<u8>,
}

impl Messages {
    /// Bytes read from the pipe: complete lines are kept, each control character shown as `?` (an escape
    /// sequence of the command's must not drive the terminal under the view).
    pub(crate) fn take(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' || self.partial.len() >= MAX_LINE {
                self.end_line();
            }
            if b != b'\n' {
                self.partial.push(b);
            }
        }
    }

    fn end_line(&mut self) {
        let text: String = String::from_utf8_lossy(&self.partial)
            .chars()
            .map(|c| match c {
                '\t' => ' ',
                c if c.is_control() => '?',
                c => c,
            })
            .collect();
        self.partial.clear();
        self.lines.push_back(text);
        while self.lines.len() > MAX_LINES {
            self.lines.pop_front();
            self.not_kept += 1;
        }
    }

    /// The line not ended yet, as a line.
    fn flush(&mut self) {
        if !self.partial.is_empty() {
            self.end_line();
        }
    }
}

pub(crate) type SharedMessages = Arc<Mutex<Messages>>;

/// Runs `f` on the messages.
pub(crate) fn with<T>(m: &SharedMessages, f: impl FnOnce(&mut Messages) -> T) -> T {
    f(&mut m.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Descriptors 0, 1 and 2 as they were, put back on drop.
pub(crate) struct Capture {
    saved: [OwnedFd; 3],
    /// Says when the reader met the pipe's end (every writer closed it).
    done: mpsc::Receiver<()>,
    pub(crate) messages: SharedMessages,
}

/// `dup` of a descriptor of ours.
fn dup(fd: RawFd) -> Result<OwnedFd> {
    // SAFETY: dup makes a new descriptor or fails; nothing else is touched.
    let new = unsafe { libc::dup(fd) };
    if new < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot duplicate a standard descriptor");
    }
    // SAFETY: `new` was just made by dup and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Points descriptor `to` at what `from` is.
fn dup2(from: RawFd, to: RawFd) -> Result<()> {
    // SAFETY: dup2 replaces `to` (a standard descriptor, which this module alone moves) or fails.
    if unsafe { libc::dup2(from, to) } < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot redirect a standard descriptor");
    }
    Ok(())
}

impl Capture {
    /// Starts catching: standard output and error into a pipe read on a thread of its own, standard input
    /// from `/dev/null`.
    pub(crate) fn start() -> Result<Self> {
        let saved = [dup(0)?, dup(1)?, dup(2)?];
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).context("cannot make a pipe")?;
        let null = std::fs::File::open("/dev/null").context("cannot open /dev/null")?;
        let messages = SharedMessages::default();
        let (tx, done) = mpsc::channel();
        let theirs = Arc::clone(&messages);
        std::thread::Builder::new().name("top-messages".into()).spawn(move || {
            let mut pipe = std::fs::File::from(read);
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                with(&theirs, |m| m.take(buf.get(..n).unwrap_or_default()));
            }
            with(&theirs, Messages::flush);
            let _gone: Result<(), mpsc::SendError<()>> = tx.send(());
        })?;
        dup2(null.as_raw_fd(), 0)?;
        dup2(write.as_raw_fd(), 1)?;
        dup2(write.as_raw_fd(), 2)?;
        Ok(Self { saved, done, messages })
    }
}

impl Drop for Capture {
    /// Puts the descriptors back; the lines still in the pipe are read (for a moment at most: a process
    /// the recording started may still hold the pipe).
    fn drop(&mut self) {
        for (to, saved) in self.saved.iter().enumerate() {
            // A descriptor that cannot be put back leaves nothing better to do.
            drop(dup2(saved.as_raw_fd(), i32::try_from(to).unwrap_or(2)));
        }
        let _waited: Result<(), mpsc::RecvTimeoutError> = self.done.recv_timeout(Duration::from_millis(300));
        with(&self.messages, Messages::flush);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_bounded_and_escapes_shown_as_question_marks() {
        let mut m = Messages::default();
        m.take(b"one\ntw");
        m.take(b"o\x1b[2J\tx\n");
        assert_eq!(m.lines, ["one", "two?[2J x"]);
        for i in 0..MAX_LINES {
            m.take(format!("{i}\n").as_bytes());
        }
        assert_eq!((m.lines.len(), m.not_kept), (MAX_LINES, 2));
        m.take(&vec![b'a'; MAX_LINE + 1]);
        m.flush();
        assert_eq!(m.lines.iter().rev().take(2).map(String::len).collect::<Vec<_>>(), [1, MAX_LINE]);
    }
}
