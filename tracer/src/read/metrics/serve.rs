//! The metrics endpoint: `GET /metrics` (and `HEAD`) answered with the `OpenMetrics` text, on the
//! recording's runtime but off its loop, so that no local user can starve the scrapes or the recording.
//!
//! Any local user can connect to a loopback port. What a connection can take is bounded:
//! - it gets [`HEAD_TIME`] to send its request head ([`MAX_REQUEST`] bytes at most), then [`WRITE_TIME`]
//!   to take the answer, written in chunks of [`CHUNK`] bytes, each to be taken within [`STALL_TIME`]:
//!   a client that asks and never reads is closed then, not at the end of [`WRITE_TIME`];
//! - at most [`MAX_CONNECTIONS`] are open at once. Past that, room is made by closing the connection that
//!   has made no progress for longest: first one whose answer has stalled for [`STALLED`] (its client
//!   does not read), then one still sending its head after [`HEAD_GRACE`] (a slowloris); while every open
//!   one makes progress, new ones wait in the kernel's queue, refused by none. A connection closed before
//!   its client took the answer is reset, so the kernel keeps none of it. So a client that sends its
//!   request at once and reads its answer (a scraper) is answered, however many slow or non-reading
//!   connections another user opens;
//! - the bytes of answers in flight are bounded: each connection's kernel send buffer is [`SEND_BUFFER`],
//!   the body itself is one shared copy, so all answers together hold at most [`MAX_CONNECTIONS`] x
//!   [`SEND_BUFFER`] (64 MiB; the kernel doubles it) beyond it, whatever the body's size;
//! - the body is rendered only for a complete `GET /metrics`, on a blocking thread, one render at a time,
//!   and a body rendered in the last [`FRESH`] answers the scrapes that come meanwhile: a flood of scrapes
//!   costs one render per [`FRESH`], never one each.
//!
//! The request is parsed by hand (one line and a few headers): an HTTP server crate would add its own
//! connection handling, which this bounded loop replaces in a hundred lines.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
    sync::oneshot,
};

use super::{Session, Shared};

/// Connections open at once.
pub(super) const MAX_CONNECTIONS: usize = 512;
/// A request's line and headers: more is not a scrape.
const MAX_REQUEST: usize = 8192;
/// A client gets this long to send its request head.
const HEAD_TIME: Duration = Duration::from_secs(2);
/// And this long to take the answer.
const WRITE_TIME: Duration = Duration::from_secs(5);
/// A body this fresh answers the next scrape too.
const FRESH: Duration = Duration::from_millis(250);
/// An answer is written in chunks of this many bytes...
const CHUNK: usize = 64 << 10;
/// ...each of which the client must take within this long.
const STALL_TIME: Duration = Duration::from_secs(1);
/// A connection still sending its head this long after it came may be closed to make room.
const HEAD_GRACE: Duration = Duration::from_secs(1);
/// An answer that has made no progress for this long may be closed to make room.
const STALLED: Duration = Duration::from_millis(100);
/// A connection's kernel send buffer: what a client that does not read can leave in the kernel. Without
/// it, the kernel takes megabytes of a large answer for such a client, the write never stalls, and
/// thousands of them hold gigabytes of socket memory (TCP's memory pressure then slows every scrape).
const SEND_BUFFER: usize = 128 << 10;

/// Where an open connection is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Sending its request head.
    Head,
    /// Waiting for its body (one render at a time): not closed to make room.
    Body,
    /// Taking its answer.
    Answer,
}

/// An open connection as the room keeper sees it.
struct Conn {
    id: u64,
    stage: Stage,
    /// Its last progress: accepted, head read, a chunk taken.
    since: Instant,
    /// Closes it (None once sent).
    close: Option<oneshot::Sender<()>>,
}

/// The endpoint: its address and what its tasks share.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    /// The listening socket's descriptor, open until the accepting task is dropped with the runtime.
    listener_fd: std::os::fd::RawFd,
    inner: Arc<Inner>,
    accepting: tokio::task::JoinHandle<()>,
}

struct Inner {
    metrics: Shared,
    /// What the session knows besides the records, as of its last tick.
    session: Mutex<Session>,
    /// The open connections.
    conns: Mutex<Vec<Conn>>,
    open: AtomicUsize,
    next_id: AtomicU64,
    /// Connections closed to make room; waits of 5 ms for room before accepting.
    evicted: AtomicU64,
    waited: AtomicU64,
    /// The last body and when it was rendered; held across a render, so renders take turns.
    cache: tokio::sync::Mutex<Option<(Instant, Arc<str>)>>,
}

impl Server {
    /// Listens on `addr` and starts answering, on the current runtime.
    pub(crate) fn start(addr: SocketAddr, metrics: Shared) -> Result<Self> {
        let std = std::net::TcpListener::bind(addr).map_err(|e| anyhow!("cannot serve metrics on {addr} ({e})"))?;
        std.set_nonblocking(true)?;
        let addr = std.local_addr()?;
        let listener = TcpListener::from_std(std)?;
        let listener_fd = std::os::fd::AsRawFd::as_raw_fd(&listener);
        let inner = Arc::new(Inner {
            metrics,
            session: Mutex::new(Session::default()),
            conns: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            cache: tokio::sync::Mutex::new(None),
        });
        let accepting = tokio::spawn(accept_loop(listener, Arc::clone(&inner)));
        Ok(Self { addr, listener_fd, inner, accepting })
    }
}

/// The recording drives the endpoint through [`crate::trace::Endpoint`].
impl crate::trace::Endpoint for Server {
    fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The session's figures for the next renders (drops, processes traced).
    fn set_session(&self, dropped: std::collections::BTreeMap<String, u64>, processes_traced: u64) {
        let mut session = self.inner.session.lock().unwrap_or_else(PoisonError::into_inner);
        (session.dropped, session.processes_traced) = (dropped, processes_traced);
    }

    /// The footer's counters so far, for the next renders.
    fn set_counted(&self, counted: std::collections::BTreeMap<String, u64>) {
        self.inner.session.lock().unwrap_or_else(PoisonError::into_inner).counted = counted;
    }

    /// The listening socket's descriptor: the child that releases the probes closes it, so that the port is
    /// free as soon as this process ends (a restarted service binds it again at once).
    fn listener_fd(&self) -> std::os::fd::RawFd {
        self.listener_fd
    }

    /// (connections closed to make room, waits of 5 ms for room before accepting).
    fn shed(&self) -> (u64, u64) {
        (self.inner.evicted.load(Ordering::Relaxed), self.inner.waited.load(Ordering::Relaxed))
    }
}

impl Drop for Server {
    /// The endpoint closes with the recording.
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Accepts until the server is dropped (its task aborted).
#[expect(clippy::infinite_loop, reason = "the loop ends when the server's drop aborts its task")]
async fn accept_loop(listener: TcpListener, inner: Arc<Inner>) {
    loop {
        // Room first: past MAX_CONNECTIONS a stalled or slow connection is closed; while every open one
        // makes progress (each ends within WRITE_TIME), new ones wait in the kernel's queue, refused by none.
        while inner.open.load(Ordering::Relaxed) >= MAX_CONNECTIONS && !inner.evict() {
            inner.waited.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let Ok((sock, _)) = listener.accept().await else {
            // Out of descriptors, or a connection reset before it was taken: try again shortly.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let (close, closed) = oneshot::channel();
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Conn { id, stage: Stage::Head, since: Instant::now(), close: Some(close) };
        inner.lock_conns().push(conn);
        inner.open.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(serve(Arc::clone(&inner), sock, id, closed));
    }
}

impl Inner {
    fn lock_conns(&self) -> std::sync::MutexGuard<'_, Vec<Conn>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the connection that has made no progress for longest: one whose answer has stalled for
    /// [`STALLED`], else one still sending its head after [`HEAD_GRACE`]. False when there is none.
    fn evict(&self) -> bool {
        let mut conns = self.lock_conns();
        let now = Instant::now();
        let victim = conns
            .iter_mut()
            .filter(|c| c.close.is_some())
            // A client that sends its request at once is not closed in the moment before it is read.
            .filter(|c| match c.stage {
                Stage::Head => now.duration_since(c.since) >= HEAD_GRACE,
                Stage::Body => false,
                Stage::Answer => now.duration_since(c.since) >= STALLED,
            })
            // An answer its client does not take goes first (the clearest sign of a client that is no
            // scraper), then the connection longest in its head.
            .min_by_key(|c| (c.stage == Stage::Head, c.since));
        let close = victim.and_then(|c| c.close.take());
        drop(conns);
        close.is_some_and(|close| {
            // Err: the connection ended meanwhile; either way it holds no room now.
            let _ended = close.send(());
            self.evicted.fetch_add(1, Ordering::Relaxed);
            true
        })
    }

    /// The connection `id` made progress, now at `stage`.
    fn progress(&self, id: u64, stage: Stage) {
        if let Some(c) = self.lock_conns().iter_mut().find(|c| c.id == id) {
            (c.stage, c.since) = (stage, Instant::now());
        }
    }

    /// The connection `id` is gone.
    fn gone(&self, id: u64) {
        self.lock_conns().retain(|c| c.id != id);
    }

    /// The body for a scrape: the fresh one, or a new render on a blocking thread.
    async fn body(&self) -> Arc<str> {
        let mut cache = self.cache.lock().await;
        if let Some((at, body)) = cache.as_ref()
            && at.elapsed() < FRESH
        {
            return Arc::clone(body);
        }
        let metrics = Arc::clone(&self.metrics);
        let session = self.session.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let rendered = tokio::task::spawn_blocking(move || super::with(&metrics, |m| m.render(&session))).await;
        let body: Arc<str> = Arc::from(rendered.unwrap_or_else(|_| "# EOF\n".to_owned()));
        *cache = Some((Instant::now(), Arc::clone(&body)));
        body
    }
}

/// One connection: its head within [`HEAD_TIME`], then the answer within [`WRITE_TIME`], each chunk of it
/// taken within [`STALL_TIME`]; closed at any point to make room.
async fn serve(inner: Arc<Inner>, mut sock: TcpStream, id: u64, mut closed: oneshot::Receiver<()>) {
    /// Gives back the connection's room, however it ends.
    struct Open {
        inner: Arc<Inner>,
        id: u64,
    }
    impl Drop for Open {
        fn drop(&mut self) {
            self.inner.gone(self.id);
            self.inner.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let _open = Open { inner: Arc::clone(&inner), id };
    // Err: the socket is gone already; the answer's write says so.
    let _sized = rustix::net::sockopt::set_socket_send_buffer_size(&sock, SEND_BUFFER);
    let head = tokio::select! {
        head = tokio::time::timeout(HEAD_TIME, read_head(&mut sock)) => head,
        _ = &mut closed => return,
    };
    let Ok(Ok(head)) = head else { return };
    inner.progress(id, Stage::Body);
    let answer = async {
        match request(&head) {
            Request::Scrape { body } => {
                let text = inner.body().await;
                inner.progress(id, Stage::Answer);
                let header = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    text.len()
                );
                sock.write_all(header.as_bytes()).await?;
                let body = if body { text.as_bytes() } else { &[] };
                for chunk in body.chunks(CHUNK) {
                    tokio::time::timeout(STALL_TIME, sock.write_all(chunk)).await??;
                    inner.progress(id, Stage::Answer);
                }
            }
            Request::NotFound => {
                sock.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 24\r\nConnection: close\r\n\r\nmetrics are at /metrics\n").await?;
            }
            Request::Method => {
                sock.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await?;
            }
        }
        sock.shutdown().await
    };
    let done = tokio::select! {
        answered = tokio::time::timeout(WRITE_TIME, answer) => matches!(answered, Ok(Ok(()))),
        _ = &mut closed => false,
    };
    if !done {
        // Closed before its client took the answer: reset, so the kernel drops what it still holds for it.
        let _reset = rustix::net::sockopt::set_socket_linger(&sock, Some(Duration::ZERO));
    }
}

/// The request head: up to the blank line, at most [`MAX_REQUEST`] bytes (what came, if the client
/// stopped sending).
async fn read_head(sock: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while buf.len() < MAX_REQUEST {
        let k = sock.read(&mut chunk).await?;
        if k == 0 {
            break;
        }
        buf.extend_from_slice(chunk.get(..k).unwrap_or_default());
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            break;
        }
    }
    buf.truncate(MAX_REQUEST);
    Ok(buf)
}

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    /// `GET /metrics` (`body`) or `HEAD /metrics`, with or without a query string.
    Scrape {
        body: bool,
    },
    NotFound,
    Method,
}

fn request(head: &[u8]) -> Request {
    let line = head.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let body = match method {
        b"GET" => true,
        b"HEAD" => false,
        _ => return Request::Method,
    };
    if target == b"/metrics" || target.starts_with(b"/metrics?") { Request::Scrape { body } } else { Request::NotFound }
}

#[cfg(test)]
mod tests {
    use super::{Request, request};

    #[test]
    fn get_and_head_of_metrics_are_scrapes() {
        assert_eq!(request(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), Request::Scrape { body: true });
        assert_eq!(request(b"GET /metrics?x=1 HTTP/1.1\r\n\r\n"), Request::Scrape { body: true });
        assert_eq!(request(b"HEAD /metrics HTTP/1.1\r\n\r\n"), Request::Scrape { body: false });
        assert_eq!(request(b"GET /metricsx HTTP/1.1\r\n\r\n"), Request::NotFound);
        assert_eq!(request(b"GET / HTTP/1.1\r\n\r\n"), Request::NotFound);
        assert_eq!(request(b"POST /metrics HTTP/1.1\r\n\r\n"), Request::Method);
        assert_eq!(request(b""), Request::Method);
    }
}
