//! Where the write side's lines go ([`Sink`], ripgrep's `Sink` shape): attribution is its one producer.
//! The trace [`Writer`] is the sink of a recording; a test's sink keeps what it is given.

use std::rc::Rc;

use anyhow::Result;

use super::{Line, Repeat, Writer, event::Launch};

/// Takes the lines attribution makes, in order.
pub(crate) trait Sink {
    /// One line.
    fn line(&mut self, line: &Line) -> Result<()>;

    /// A run of repeats written whole (one `repeat` line, no launch made) when the thread's last launches
    /// written are `sources`, those the run copies; false (nothing written): its launches are to be made.
    fn whole_run(&mut self, r: &Repeat, sources: &[Rc<Launch>]) -> Result<bool>;
}

impl Sink for Writer {
    fn line(&mut self, line: &Line) -> Result<()> {
        self.write(line)
    }

    fn whole_run(&mut self, r: &Repeat, sources: &[Rc<Launch>]) -> Result<bool> {
        self.pass_run(r, sources)
    }
}
