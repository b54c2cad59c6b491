//! The metrics endpoint: `GET /metrics` (and `HEAD`) answered with the `OpenMetrics` text, on the
//! recording's runtime but off its loop, so that no local user can starve the scrapes or the recording.
//!
//! Any local user can connect to a loopback port. What a connection can take is bounded:
//! - it gets [`HEAD_TIME`] to send its request head ([`MAX_REQUEST`] bytes at most), then [`WRITE_TIME`]
//!   to take the answer;
//! - at most [`MAX_CONNECTIONS`] are open at once; when a new one comes past that, the oldest one still
//!   sending its head is closed to make room, so a client that sends its request at once (a scraper) is
//!   always answered, however many slow ones another user keeps opening;
//! - the body is rendered only for a complete `GET /metrics`, on a blocking thread, one render at a time,
//!   and a body rendered in the last [`FRESH`] answers the scrapes that come meanwhile: a flood of scrapes
//!   costs one render per [`FRESH`], never one each.
//!
//! The request is parsed by hand (one line and a few headers): an HTTP server crate would add its own
//! connection handling, which this bounded loop replaces in a hundred lines.

use std::{
    collections::VecDeque,
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

/// The endpoint: its address and what its tasks share.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    inner: Arc<Inner>,
    accepting: tokio::task::JoinHandle<()>,
}

struct Inner {
    metrics: Shared,
    /// What the session knows besides the records, as of its last tick.
    session: Mutex<Session>,
    /// Connections still sending their head, oldest first: (id, the signal that closes it).
    waiting: Mutex<VecDeque<(u64, oneshot::Sender<()>)>>,
    open: AtomicUsize,
    next_id: AtomicU64,
    /// Connections closed to make room, and connections refused (every one open had sent its request).
    evicted: AtomicU64,
    refused: AtomicU64,
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
        let inner = Arc::new(Inner {
            metrics,
            session: Mutex::new(Session::default()),
            waiting: Mutex::new(VecDeque::new()),
            open: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            cache: tokio::sync::Mutex::new(None),
        });
        let accepting = tokio::spawn(accept_loop(listener, Arc::clone(&inner)));
        Ok(Self { addr, inner, accepting })
    }

    /// The session's figures for the next renders (drops, processes traced).
    pub(crate) fn set_session(&self, session: Session) {
        *self.inner.session.lock().unwrap_or_else(PoisonError::into_inner) = session;
    }

    /// (connections closed to make room, connections refused).
    pub(crate) fn shed(&self) -> (u64, u64) {
        (self.inner.evicted.load(Ordering::Relaxed), self.inner.refused.load(Ordering::Relaxed))
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
        let Ok((sock, _)) = listener.accept().await else {
            // Out of descriptors, or a connection reset before it was taken: try again shortly.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if inner.open.load(Ordering::Relaxed) >= MAX_CONNECTIONS && !inner.evict_oldest_waiting() {
            inner.refused.fetch_add(1, Ordering::Relaxed);
            continue; // every open connection has sent its request: they end within WRITE_TIME
        }
        let (close, closed) = oneshot::channel();
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        inner.waiting.lock().unwrap_or_else(PoisonError::into_inner).push_back((id, close));
        inner.open.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(serve(Arc::clone(&inner), sock, id, closed));
    }
}

impl Inner {
    /// Closes the oldest connection still sending its head; false when there is none.
    fn evict_oldest_waiting(&self) -> bool {
        let oldest = self.waiting.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
        oldest.is_some_and(|(_, close)| {
            // Err: the connection ended meanwhile; either way it holds no room now.
            let _ended = close.send(());
            self.evicted.fetch_add(1, Ordering::Relaxed);
            true
        })
    }

    /// The connection `id` has sent its head (or gone): it can no longer be closed to make room.
    fn done_waiting(&self, id: u64) {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner).retain(|(w, _)| *w != id);
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

/// One connection: its head within [`HEAD_TIME`] (unless closed to make room), then the answer within
/// [`WRITE_TIME`].
async fn serve(inner: Arc<Inner>, mut sock: TcpStream, id: u64, closed: oneshot::Receiver<()>) {
    struct Open(Arc<Inner>);
    impl Drop for Open {
        fn drop(&mut self) {
            self.0.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let _open = Open(Arc::clone(&inner));
    let head = tokio::select! {
        head = tokio::time::timeout(HEAD_TIME, read_head(&mut sock)) => head,
        _ = closed => return,
    };
    inner.done_waiting(id);
    let Ok(Ok(head)) = head else { return };
    let answer = async {
        match request(&head) {
            Request::Scrape { body } => {
                let text = inner.body().await;
                let header = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    text.len()
                );
                sock.write_all(header.as_bytes()).await?;
                if body {
                    sock.write_all(text.as_bytes()).await?;
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
    drop(tokio::time::timeout(WRITE_TIME, answer).await);
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
