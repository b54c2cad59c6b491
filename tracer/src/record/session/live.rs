//! What a recording shows while it runs: the live line on stderr (processes, launches and dispatches per
//! second, drops), and the metrics endpoint (`--metrics`).

use std::time::Duration;

/// The live line on stderr while recording (a terminal only, and not with -q), redrawn each second.
pub(in crate::record) struct LiveStatus {
    enabled: bool,
    started: std::time::Instant,
    last: std::time::Instant,
    last_counts: (u64, u64),
    shown: bool,
}

impl LiveStatus {
    pub(in crate::record) fn new(enabled: bool) -> Self {
        let now = std::time::Instant::now();
        Self { enabled, started: now, last: now, last_counts: (0, 0), shown: false }
    }

    pub(in crate::record) fn due(&self) -> bool {
        self.enabled && self.last.elapsed() >= Duration::from_secs(1)
    }

    #[expect(clippy::float_arithmetic, clippy::cast_precision_loss, reason = "rates per second")]
    pub(in crate::record) fn line(&mut self, processes: usize, launches: u64, dispatches: u64, dropped: u64) -> String {
        let secs = self.last.elapsed().as_secs_f64().max(1e-3);
        let rate = |now: u64, before: u64| (now.saturating_sub(before) as f64 / secs).round() as u64;
        let line = format!(
            "tracer: {} s, {processes} process{}, {} launches/s, {} dispatches/s, {dropped} dropped",
            self.started.elapsed().as_secs(),
            if processes == 1 { "" } else { "es" },
            rate(launches, self.last_counts.0),
            rate(dispatches, self.last_counts.1),
        );
        self.last = std::time::Instant::now();
        self.last_counts = (launches, dispatches);
        line
    }

    pub(in crate::record) fn show(&mut self, line: &str) {
        crate::os::messages::status(line);
        self.shown = true;
    }

    /// Takes the line away before the final summary.
    pub(in crate::record) fn clear(&mut self) {
        if self.shown {
            crate::os::messages::clear_status();
            self.shown = false;
        }
    }
}

/// The live metrics of a recording and their endpoint (`--metrics`), which answers on tasks of its own.
pub(in crate::record) struct LiveMetrics {
    pub(crate) server: Box<dyn crate::trace::Endpoint>,
}
