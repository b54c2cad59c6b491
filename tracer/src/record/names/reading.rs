//! The finders' read budget: what a code reader may read of one file ([`FILE_BYTES`]) and over the recording
//! ([`RECORDING_BYTES`]), the code ranges it decodes ([`MAX_CODE_SECTIONS`], each byte once: [`code_ranges`])
//! and the call sites it keeps ([`MAX_SITES`]). Past a bound, what was found so far stands, and the file is
//! said unread with the reason ([`Budget::cut`]). The readers that draw on it: ggml-vulkan's pipeline calls
//! ([`super::pipelines`], behind [`super::spirv::ShaderIndex`]), HIP's registration calls
//! ([`super::registration`]), run on the finders' thread ([`super::finder`]), and `tracer inspect`.
//!
//! The budgets, against the real files: Debian's stripped `libggml-vulkan.so` (ggml 0.27, 42 MB) has 1.4 MB
//! of code and 40 MB of SPIR-V that the finder walks; Debian's `libggml-hip.so` (1.27 GB) 11.6 MB of code.
//! 64 MiB a file is five times the largest; a recording's 1 GiB sixteen such files.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes a finder reads of one file at most.
pub(crate) const FILE_BYTES: u64 = 64 << 20;
/// Bytes the finders read over a whole recording at most.
pub(crate) const RECORDING_BYTES: u64 = 1 << 30;
/// Code ranges (executable sections, overlaps merged) of one file decoded at most (a real library has 5).
pub(crate) const MAX_CODE_SECTIONS: usize = 64;
/// Call sites (or addresses looked at for one) a finder keeps of one file at most (ggml-vulkan has about
/// 2 000 pipeline calls, rocSPARSE 12 425 registrations).
pub(crate) const MAX_SITES: usize = 1 << 18;

/// What the recording's finders may still read.
static RECORDING_LEFT: AtomicU64 = AtomicU64::new(RECORDING_BYTES);

/// A finder's read budget for one file.
#[derive(Debug)]
pub(crate) struct Budget {
    left: u64,
    /// Bytes read so far.
    pub(crate) spent: u64,
    /// Draws on the recording's budget too.
    shared: bool,
    /// Why the file was not read in full (None: it was).
    pub(crate) cut: Option<&'static str>,
}

/// Why a finder stopped reading a file.
pub(crate) const CUT_FILE: &str = "past the 64 MiB a finder reads of one file";
pub(crate) const CUT_RECORDING: &str = "past the 1 GiB the finders read in one recording";
pub(crate) const CUT_SECTIONS: &str = "past the 64 code ranges a finder decodes in one file";
pub(crate) const CUT_SITES: &str = "past the 262 144 call sites a finder keeps of one file";

impl Budget {
    /// A file's budget, drawn from the recording's.
    pub(crate) const fn file() -> Self {
        Self::drawn(FILE_BYTES)
    }

    /// A budget of `bytes`, drawn from the recording's.
    pub(crate) const fn drawn(bytes: u64) -> Self {
        Self { left: bytes, spent: 0, shared: true, cut: None }
    }

    /// A budget of `bytes` that draws on nothing else (`tracer inspect`'s, the fuzz targets').
    pub(crate) const fn alone(bytes: u64) -> Self {
        Self { left: bytes, spent: 0, shared: false, cut: None }
    }

    /// Takes `n` bytes to read; false (and the reason kept) when the file's or the recording's budget has
    /// not that much left.
    pub(crate) fn take(&mut self, n: u64) -> bool {
        if self.cut.is_some() {
            return false;
        }
        let Some(left) = self.left.checked_sub(n) else {
            self.cut = Some(CUT_FILE);
            return false;
        };
        if self.shared
            && RECORDING_LEFT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(n)).is_err()
        {
            self.cut = Some(CUT_RECORDING);
            return false;
        }
        self.left = left;
        self.spent = self.spent.saturating_add(n);
        true
    }

    /// Stops the reading for `why` (a bound other than bytes), keeping the first reason.
    pub(crate) fn stop(&mut self, why: &'static str) {
        self.cut.get_or_insert(why);
    }
}

/// The code ranges of sections (file offset, size, address), sorted by offset, each byte once: a range
/// covered by one before it is dropped, one overlapping it keeps its part past it. At most
/// [`MAX_CODE_SECTIONS`] ranges (the budget stopped past them).
pub(crate) fn code_ranges(mut sections: Vec<(u64, u64, u64)>, budget: &mut Budget) -> Vec<(u64, u64, u64)> {
    sections.sort_unstable();
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    let mut covered = 0u64;
    for (offset, size, addr) in sections {
        let Some(end) = offset.checked_add(size) else { continue };
        let from = offset.max(covered);
        if end <= from {
            continue;
        }
        if out.len() >= MAX_CODE_SECTIONS {
            budget.stop(CUT_SECTIONS);
            break;
        }
        let skip = from - offset;
        out.push((from, end - from, addr.wrapping_add(skip)));
        covered = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_over_the_same_bytes_are_one_range_and_overlaps_keep_their_new_part() {
        let mut b = Budget::alone(100);
        let same = vec![(0x1000, 0x100, 0x1000); 2000];
        assert_eq!(code_ranges(same, &mut b), [(0x1000, 0x100, 0x1000)]);
        let parts = vec![(0x1080, 0x100, 0x5080), (0x1000, 0x100, 0x5000), (0x1010, 0x10, 0x5010), (u64::MAX, 2, 0)];
        assert_eq!(code_ranges(parts, &mut b), [(0x1000, 0x100, 0x5000), (0x1100, 0x80, 0x5100)]);
        assert_eq!(b.cut, None);
        let many: Vec<_> = (0..100u64).map(|i| (i * 0x100, 0x100, i * 0x100)).collect();
        assert_eq!(code_ranges(many, &mut b).len(), MAX_CODE_SECTIONS);
        assert_eq!(b.cut, Some(CUT_SECTIONS));
    }

    #[test]
    fn a_budget_refuses_past_its_bytes_and_keeps_why() {
        let mut b = Budget::alone(10);
        assert!(b.take(6) && !b.take(5) && b.cut == Some(CUT_FILE));
        // Once cut, nothing more.
        assert!(!b.take(1));
        assert_eq!(b.spent, 6);
    }
}
