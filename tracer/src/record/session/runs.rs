//! Attributing an event and writing its lines, a run of repeated launches passed whole or part by part; the
//! runs the kernel still holds at the end of the recording (each the last of its thread's launches: any
//! later record of the thread would have written it).

use anyhow::Result;

use super::Session;
use crate::{record::intake::decode::Event, trace::Line};

impl Session<'_> {
    /// Writes the runs under way in the kernel's map, after the ring's last read.
    pub(super) fn runs_under_way(&mut self) -> Result<()> {
        let mut out = Vec::new();
        for r in self.kernel.runs_under_way() {
            self.attribute(Event::Repeat(r), &mut out)?;
        }
        Ok(())
    }

    /// Attributes an event and writes its lines (`out`: an empty buffer, left empty); a run's launches
    /// part by part, each part written before the next is made.
    pub(super) fn attribute(&mut self, ev: Event, out: &mut Vec<Line>) -> Result<()> {
        // A run whose copies would be attributed as the launches they copy, which the writer just wrote
        // for its thread: written as the kernel counted it (one line, no launch made).
        if let Event::Repeat(r) = &ev
            && let Some(sources) = self.attr.passable(r)
            && self.writer.pass_run(r, &sources)?
        {
            self.attr.passed(r);
            return Ok(());
        }
        self.attr.event(ev, out);
        loop {
            for line in out.drain(..) {
                self.writer.write(&line)?;
            }
            if !self.attr.expand_more(out) {
                return Ok(());
            }
        }
    }
}
