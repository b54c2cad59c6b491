//! The ring buffer step.
//!
//! Records the probes committed are read in order, decoded and attributed, then written. Probes wake the reader only when the ring is a quarter full, so the session also drains it
//! on a short timer.

use anyhow::{Result, anyhow};
use aya::maps::{MapData, RingBuf};
use tokio::io::unix::AsyncFd;

use crate::{attribute::Attributor, decode::decode, trace::Writer};

/// The `EVENTS` ring, registered for readiness with the session's event loop.
pub struct Ring {
    fd: AsyncFd<RingBuf<MapData>>,
    /// Records that could not be decoded (counted into the footer, never silently dropped).
    pub undecodable: u64,
}

impl Ring {
    pub fn new(ring: RingBuf<MapData>) -> Result<Self> {
        // SAFETY: the ring buffer owns its map fd, which stays open and unchanged until the AsyncFd drops it.
        let fd = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
            .map_err(|e| anyhow!("cannot poll the ring buffer: {e}"))?;
        Ok(Self { fd, undecodable: 0 })
    }

    /// Waits until the kernel says the ring has data, then drains it.
    pub async fn wait_and_drain(&mut self, attr: &mut Attributor, writer: &mut Writer) -> Result<()> {
        let mut guard = self.fd.readable_mut().await?;
        drain(guard.get_inner_mut(), attr, writer, &mut self.undecodable)?;
        guard.clear_ready();
        Ok(())
    }

    /// Reads the records in the ring now (at most [`MAX_PER_DRAIN`]; the session's timer comes back).
    pub fn drain(&mut self, attr: &mut Attributor, writer: &mut Writer) -> Result<()> {
        drain(self.fd.get_mut(), attr, writer, &mut self.undecodable)
    }
}

/// Records read per drain at most: a ring that never empties (a target launching faster than the
/// reader keeps up) must not starve the session's timers (`--duration`, signals, status).
const MAX_PER_DRAIN: usize = 1 << 16;

#[expect(clippy::iter_with_drain, reason = "one buffer serves every record")]
fn drain(ring: &mut RingBuf<MapData>, attr: &mut Attributor, writer: &mut Writer, undecodable: &mut u64) -> Result<()> {
    let mut out = Vec::new();
    for _ in 0..MAX_PER_DRAIN {
        let Some(item) = ring.next() else { break };
        match decode(&item) {
            Ok(ev) => attr.event(ev, &mut out),
            Err(_) => *undecodable += 1,
        }
        drop(item);
        for r in out.drain(..) {
            writer.write(&r)?;
        }
    }
    Ok(())
}
