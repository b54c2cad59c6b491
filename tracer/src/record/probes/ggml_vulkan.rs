//! Where ggml-vulkan makes its pipelines: `ggml_vk_create_pipeline_func`, a `static` function of the library
//! (no exported symbol, and none at all in a stripped copy such as Debian's), found by its own code.
//!
//! The function asserts `wg_denoms[0] > 0 && wg_denoms[1] > 0 && wg_denoms[2] > 0` before it makes the
//! shader module (ggml 0.25 to 0.27; the text is `GGML_ASSERT`'s, kept in every build). The one
//! instruction that loads that string's address (`lea reg, [rip+disp32]`) lies in the function; the
//! library's call-frame table (`.eh_frame`, which every x86-64 shared library keeps for unwinding, stripped
//! or not) says where the function around it begins. Anything else (the string absent, loaded from several
//! functions, or from code no frame entry covers) leaves the function unprobed, with the reason: a guessed
//! entry would read garbage as a name.

use std::collections::BTreeSet;

use gimli::UnwindSection as _;
use object::{Object as _, ObjectSection as _, SectionKind};

use crate::{
    os::files::CodeFile,
    record::names::reading::{self, Budget},
};

/// The assertion's text, with its terminating NUL.
pub(crate) const MARKER: &[u8] = b"wg_denoms[0] > 0 && wg_denoms[1] > 0 && wg_denoms[2] > 0\0";

/// Bytes read at a time while scanning a section.
const WINDOW: usize = 1 << 20;
/// The call-frame table read whole, up to this size (ggml-vulkan's: a few hundred KiB).
const EH_FRAME_MAX: u64 = 64 << 20;
/// Loads of the marker kept at most (one is expected).
const MAX_REFERENCES: usize = 16;

/// Bytes of read-only data and code read to find the function, at most (Debian's ggml 0.27: 40 MB and
/// 1.4 MB), drawn from the recording's finder budget; each byte once however many section headers cover it.
const MAKER_BYTES: u64 = 128 << 20;

/// Why the pipeline maker was not found in a library copy.
pub(crate) const NO_MARKER: &str = "the library holds no `wg_denoms[0] > 0 && ...` assertion text, by which \
     ggml_vk_create_pipeline_func is found (another ggml version): pipelines are named by their SPIR-V arrays";
pub(crate) const NO_REFERENCE: &str =
    "no instruction loads the assertion text by which ggml_vk_create_pipeline_func is found";
pub(crate) const NO_FRAME: &str =
    "the code loading the assertion text lies in no call-frame entry (`.eh_frame`): the function's entry is unknown";
pub(crate) const TOO_LARGE: &str = "the library's read-only data and code are past what tracer reads to find \
     ggml_vk_create_pipeline_func (128 MiB, each byte once; or the recording's 1 GiB for finders): left unprobed";
pub(crate) const SEVERAL: &str = "the assertion text by which ggml_vk_create_pipeline_func is found is loaded in \
     several functions (inlined copies, whose arguments are not in registers): left unprobed";

/// The file offset of the first instruction of ggml-vulkan's pipeline maker in `file`, or why not.
pub(crate) fn pipeline_maker(file: &CodeFile) -> Result<u64, &'static str> {
    pipeline_maker_within(file, &mut Budget::drawn(MAKER_BYTES))
}

/// The same, reading within `budget` (past it: [`TOO_LARGE`]).
pub(crate) fn pipeline_maker_within(file: &CodeFile, budget: &mut Budget) -> Result<u64, &'static str> {
    let view = file.elf();
    let elf = crate::os::elf::parse(&view).ok_or("not an ELF file")?;
    if elf.architecture() != object::Architecture::X86_64 {
        return Err("not an x86-64 library");
    }
    let ranges = |budget: &mut Budget, text: bool| {
        let all = elf.sections().filter(|s| {
            if text {
                s.kind() == SectionKind::Text
            } else {
                matches!(s.kind(), SectionKind::ReadOnlyString | SectionKind::ReadOnlyData)
            }
        });
        let all = all.take(reading::MAX_SITES).filter_map(|s| s.file_range().map(|(o, n)| (o, n, s.address())));
        reading::code_ranges(all.collect(), budget)
    };
    let mut markers = BTreeSet::new();
    for (offset, size, address) in ranges(budget, false) {
        scan(file, (offset, size), MARKER.len() - 1, budget, |window, at| {
            // One is expected; a file holding the text over and over is bounded here, and refused below.
            for i in memchr::memmem::find_iter(window, MARKER).take(MAX_REFERENCES.saturating_sub(markers.len())) {
                markers.insert(address.saturating_add(at).saturating_add(i as u64));
            }
        });
    }
    if budget.cut.is_some() {
        return Err(TOO_LARGE);
    }
    if markers.is_empty() {
        return Err(NO_MARKER);
    }
    let mut loads = Vec::new();
    for (offset, size, address) in ranges(budget, true) {
        scan(file, (offset, size), LEA_LEN - 1, budget, |window, at| {
            let base = address.saturating_add(at);
            loads.extend(rip_relative_loads(window, base, &markers).take(MAX_REFERENCES));
        });
    }
    if budget.cut.is_some() {
        return Err(TOO_LARGE);
    }
    loads.truncate(MAX_REFERENCES);
    if loads.is_empty() {
        return Err(NO_REFERENCE);
    }
    let eh = elf.section_by_name(".eh_frame").ok_or(NO_FRAME)?;
    let (eh_off, eh_size) = eh.file_range().ok_or(NO_FRAME)?;
    let table = file.read_vec(eh_off, eh_size, EH_FRAME_MAX, "call-frame table").ok().ok_or(NO_FRAME)?;
    let text = elf.section_by_name(".text").map_or(0, |s| s.address());
    let mut starts = BTreeSet::new();
    for at in loads {
        starts.insert(function_around(&table, eh.address(), text, at).ok_or(NO_FRAME)?);
    }
    let [start] = starts.into_iter().collect::<Vec<_>>()[..] else { return Err(SEVERAL) };
    // The section holding the entry turns its address into a file offset.
    elf.sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .find_map(|s| {
            let (off, size) = s.file_range()?;
            let within = start.checked_sub(s.address()).filter(|&w| w < size)?;
            off.checked_add(within)
        })
        .ok_or(NO_FRAME)
}

/// Hands `f` the `size` bytes at `offset` one window at a time, with its position in the range; each
/// window after the first repeats the last `overlap` bytes of the one before, so that nothing `overlap + 1`
/// bytes long is cut. A read that fails, or one past `budget`, ends the scan.
fn scan(
    file: &CodeFile,
    (offset, size): (u64, u64),
    overlap: usize,
    budget: &mut Budget,
    mut f: impl FnMut(&[u8], u64),
) {
    let mut window = vec![0u8; WINDOW];
    let mut at = 0u64;
    while at < size {
        let n = (size - at).min(WINDOW as u64) as usize;
        let Some(from) = offset.checked_add(at) else { return };
        if !budget.take(n as u64) {
            return;
        }
        if file.read_exact_at(from, &mut window[..n]).is_err() {
            return;
        }
        f(&window[..n], at);
        if at + n as u64 >= size {
            return;
        }
        at += n.saturating_sub(overlap).max(1) as u64;
    }
}

/// `lea r64, [rip+disp32]`: REX.W (`48`, or `4c` for r8..r15), `8d`, `ModRM` with mod 00 and r/m 101.
const LEA_LEN: usize = 7;

/// The addresses of the `lea r64, [rip+disp32]` instructions in `code` (which begins at address `base`)
/// that load one of `targets`. The pattern is matched at every byte: a match inside another instruction
/// would need its seven bytes to point exactly at a target, which the caller's uniqueness check catches.
#[expect(clippy::little_endian_bytes, reason = "x86-64 encodes displacements little-endian")]
pub(crate) fn rip_relative_loads<'a>(
    code: &'a [u8],
    base: u64,
    targets: &'a BTreeSet<u64>,
) -> impl Iterator<Item = u64> + 'a {
    code.windows(LEA_LEN).enumerate().filter_map(move |(i, w)| {
        let &[rex, opcode, modrm, d0, d1, d2, d3] = w else { return None };
        if rex & 0xfb != 0x48 || opcode != 0x8d || modrm & 0xc7 != 0x05 {
            return None;
        }
        let disp = i64::from(i32::from_le_bytes([d0, d1, d2, d3]));
        let at = base.checked_add(i as u64)?;
        let target = at.checked_add(LEA_LEN as u64)?.checked_add_signed(disp)?;
        targets.contains(&target).then_some(at)
    })
}

/// The first address of the function whose call-frame entry covers `addr`, from the `.eh_frame` bytes
/// `table` (at address `eh_frame`; `.text` at `text`, for the encodings relative to it).
pub(crate) fn function_around(table: &[u8], eh_frame: u64, text: u64, addr: u64) -> Option<u64> {
    let section = gimli::EhFrame::new(table, gimli::LittleEndian);
    let bases = gimli::BaseAddresses::default().set_eh_frame(eh_frame).set_text(text);
    let fde = section.fde_for_address(&bases, addr, gimli::EhFrame::cie_from_offset).ok()?;
    Some(fde.initial_address())
}

#[cfg(test)]
#[expect(clippy::little_endian_bytes, reason = "a call-frame table of x86-64 is little-endian")]
mod tests {
    use super::*;

    #[test]
    fn a_rip_relative_lea_of_the_marker_is_found_where_it_is() {
        // 0x1000: nop; lea rcx, [rip+0x1ff9] (-> 0x3000); lea r9, [rip-0x100] (-> 0xf08); mov rax, [rip+..]
        let code = [
            0x90, 0x48, 0x8d, 0x0d, 0xf8, 0x1f, 0x00, 0x00, 0x4c, 0x8d, 0x0d, 0x00, 0xff, 0xff, 0xff, 0x48, 0x8b, 0x05,
            0xe9, 0x1f, 0x00, 0x00,
        ];
        let targets: BTreeSet<u64> = [0x3000, 0x0f0f].into();
        assert_eq!(rip_relative_loads(&code, 0x1000, &targets).collect::<Vec<_>>(), [0x1001, 0x1008]);
        // A `mov` (8b) to the same address is no load of an address; nothing points at 0x4000.
        let other: BTreeSet<u64> = [0x4000].into();
        assert_eq!(rip_relative_loads(&code, 0x1000, &other).count(), 0);
        // Truncated code, an address at the top of the address space: no panic, no match.
        assert_eq!(rip_relative_loads(&code[..5], 0x1000, &targets).count(), 0);
        assert_eq!(rip_relative_loads(&code, u64::MAX - 4, &targets).count(), 0);
    }

    /// A call-frame table of one CIE (`zR`, pointers pc-relative signed 4-byte) and one FDE covering
    /// `start..start + len`, the table at address `at`.
    fn table(at: u64, start: u64, len: u32) -> Vec<u8> {
        let mut t = Vec::new();
        // CIE: length, id 0, version 1, "zR", code align 1, data align -8, return register 16, augmentation
        // data of 1 byte (the FDE pointer encoding 0x1b), no instructions (padded with DW_CFA_nop).
        let cie: &[u8] = &[0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x1b, 0, 0, 0];
        t.extend((cie.len() as u32).to_le_bytes());
        t.extend(cie);
        let fde_at = t.len();
        let mut fde = Vec::new();
        // The CIE pointer: from this field back to the CIE's start.
        fde.extend(((fde_at + 4) as u32).to_le_bytes());
        let field = at + fde_at as u64 + 8;
        fde.extend((start.wrapping_sub(field) as u32).to_le_bytes());
        fde.extend(len.to_le_bytes());
        fde.extend([0, 0, 0, 0]); // augmentation data length 0, then DW_CFA_nop padding
        t.extend((fde.len() as u32).to_le_bytes());
        t.extend(fde);
        t.extend([0, 0, 0, 0]); // the terminator
        t
    }

    #[test]
    fn the_function_around_an_address_is_the_frame_entry_that_covers_it() {
        let t = table(0x2000, 0x84c30, 0x2000);
        assert_eq!(function_around(&t, 0x2000, 0x1000, 0x867e6), Some(0x84c30));
        assert_eq!(function_around(&t, 0x2000, 0x1000, 0x84c30), Some(0x84c30));
        assert_eq!(function_around(&t, 0x2000, 0x1000, 0x84c30 + 0x2000), None);
        assert_eq!(function_around(&t, 0x2000, 0x1000, 0x100), None);
        // Garbage and cut tables: no panic, no function.
        assert_eq!(function_around(&t[..t.len() / 2], 0x2000, 0x1000, 0x867e6), None);
        assert_eq!(function_around(&[0xff; 64], 0x2000, 0x1000, 0x867e6), None);
        assert_eq!(function_around(&[], 0x2000, 0x1000, 0x867e6), None);
    }
}
