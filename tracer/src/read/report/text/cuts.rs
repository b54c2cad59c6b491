//! The report's words on the launches that `repeat` lines stood for past what a file of its size may: not
//! made by the reader (see `trace::runs::bound`), so every count after is short of them.

use std::fmt::Write as _;

use crate::read::report::TraceInfo;

/// A warning line naming the launches not made, the lines they came in and the bound, when there are any.
pub(super) fn write_repeats_cut(t: &TraceInfo, s: &mut String) -> std::fmt::Result {
    match t.repeats_cut.sentence() {
        Some(sentence) => writeln!(s, "warning: {sentence}"),
        None => Ok(()),
    }
}
