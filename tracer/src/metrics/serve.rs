//! The metrics endpoint: `GET /metrics` answered with the `OpenMetrics` text, one connection at a time per
//! task, on the recording's own runtime. Only what tokio gives is used (no web framework): a request is
//! one line and a few headers, bounded in size and time; at most [`MAX_CLIENTS`] are answered at once,
//! others are closed at once. A client never holds up the recording: the answer is rendered when the
//! connection is accepted and written by a task of its own.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::{Result, anyhow};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

/// Connections answered at once.
pub(super) const MAX_CLIENTS: usize = 8;
/// A request's line and headers: more is not a scrape.
const MAX_REQUEST: usize = 8192;
/// A client gets this long to send its request and take the answer.
const CLIENT_TIME: Duration = Duration::from_secs(5);

/// The listening socket and the connections being answered.
pub struct Server {
    listener: TcpListener,
    active: Arc<AtomicUsize>,
    pub addr: SocketAddr,
}

impl Server {
    /// Listens on `addr` (within the recording's runtime).
    pub fn bind(addr: SocketAddr) -> Result<Self> {
        let std = std::net::TcpListener::bind(addr).map_err(|e| {
            anyhow!("cannot serve metrics on {addr} ({e}): choose another address or port with --metrics")
        })?;
        std.set_nonblocking(true)?;
        let addr = std.local_addr()?;
        Ok(Self { listener: TcpListener::from_std(std)?, active: Arc::new(AtomicUsize::new(0)), addr })
    }

    /// The next connection.
    pub async fn accept(&self) -> Option<TcpStream> {
        self.listener.accept().await.ok().map(|(s, _)| s)
    }

    /// Whether another client may be answered now.
    pub fn has_room(&self) -> bool {
        self.active.load(Ordering::Relaxed) < MAX_CLIENTS
    }

    /// Answers one connection with `body` (rendered when it was accepted), on a task of its own.
    pub fn answer(&self, mut sock: TcpStream, body: String) {
        let active = Arc::clone(&self.active);
        active.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            drop(tokio::time::timeout(CLIENT_TIME, respond(&mut sock, body)).await);
            active.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Reads the request head and writes the answer: the metrics for `GET /metrics`, 404 for anything else.
async fn respond(sock: &mut TcpStream, body: String) -> std::io::Result<()> {
    let mut buf = vec![0u8; MAX_REQUEST];
    let mut n = 0;
    while n < buf.len() {
        let k = sock.read(&mut buf[n..]).await?;
        if k == 0 {
            break;
        }
        n += k;
        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let answer = if is_scrape(&buf[..n]) {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    } else {
        "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 24\r\nConnection: close\r\n\r\nmetrics are at /metrics\n"
            .to_owned()
    };
    sock.write_all(answer.as_bytes()).await?;
    sock.shutdown().await
}

/// `GET /metrics` (with or without a query string).
fn is_scrape(head: &[u8]) -> bool {
    let line = head.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next(), parts.next());
    method == Some(b"GET".as_slice()) && target.is_some_and(|t| t == b"/metrics" || t.starts_with(b"/metrics?"))
}

#[cfg(test)]
mod tests {
    use super::is_scrape;

    #[test]
    fn only_get_metrics_is_a_scrape() {
        assert!(is_scrape(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(is_scrape(b"GET /metrics?x=1 HTTP/1.1\r\n\r\n"));
        assert!(!is_scrape(b"GET /metricsx HTTP/1.1\r\n\r\n"));
        assert!(!is_scrape(b"POST /metrics HTTP/1.1\r\n\r\n"));
        assert!(!is_scrape(b"GET / HTTP/1.1\r\n\r\n"));
        assert!(!is_scrape(b""));
    }
}
