//! The user-space data path without the kernel, for `benches/pipeline.rs`: ring-record bytes in, decoded,
//! attributed and written to a trace file, as a recording's drain does it.

use std::{fs::File, path::Path};

use anyhow::Result;

use crate::{
    read::metrics::{Metrics, Tap},
    record::{attribute::Attributor, intake::decode::decode},
    trace::{FORMAT, Footer, Header, Line, SCHEMA, Stop, Writer},
};

/// A trace file being written from ring-record bytes.
pub struct Pipeline {
    writer: Writer,
    attr: Attributor,
    out: Vec<Line>,
}

impl Pipeline {
    /// A trace at `path` (zstd when `compress`), its header written; `metrics` feeds every record written to
    /// the live counts too, as `record --metrics` does.
    pub fn new(path: &Path, compress: bool, metrics: bool) -> Result<Self> {
        let mut writer = Writer::new(File::create(path)?, compress)?;
        if metrics {
            let live = std::sync::Arc::new(std::sync::Mutex::new(Metrics::new(true)));
            writer.set_tap(Box::new(Tap(live)));
        }
        writer.write(&Line::Header(Box::new(Header {
            format: FORMAT.into(),
            schema: SCHEMA,
            ..Default::default()
        })))?;
        Ok(Self { writer, attr: Attributor::default(), out: Vec::new() })
    }

    /// One ring record: decoded, attributed, and what it gives written.
    pub fn feed(&mut self, record: &[u8]) -> Result<()> {
        let event = decode(record).map_err(|e| anyhow::anyhow!("a ring record does not decode: {e:?}"))?;
        self.attr.event(event, &mut self.out);
        for r in self.out.drain(..) {
            self.writer.write(&r)?;
        }
        Ok(())
    }

    /// The footer written (a stop by signal) and the file closed.
    pub fn finish(self) -> Result<()> {
        self.writer.finish(Footer { stop: Stop::Signal, ..Default::default() })
    }
}
