//! Kernel names from a binary's own code, for stripped libraries.
//!
//! A HIP (or CUDA) library's module constructor registers every kernel with
//! `__hipRegisterFunction(modules, handle, device_function, device_name, ...)` (`__cudaRegisterFunction`
//! takes the same first four arguments): the handle a launch passes and the kernel's mangled name are
//! both loaded into argument registers right before the call (`lea rsi, [rip+handle]`,
//! `lea rcx, [rip+name]`). Decoding those call sites with a real x86-64 decoder recovers handle -> name
//! without a symbol table, which release builds (Ollama's `libggml-hip.so`) do not keep. A leaf: bytes
//! in, a table out.

use std::collections::{HashMap, HashSet};

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register,
};
use object::{
    Object as _, ObjectSection as _, ObjectSymbol as _, ObjectSymbolTable as _, ReadRef, RelocationTarget, SectionKind,
};
use tracer_common::api::{ApiFunc, Op};

use super::reading::{self, Budget, MAX_SITES};
use crate::os::files::CodeFile;

/// Whether a dynamic symbol (`name` or `name@VERSION`) is a registration function of the API table
/// ([`Op::Register`]): its second argument is a launch handle and its fourth the device name.
fn is_registration_symbol(name: &str) -> bool {
    let base = name.split_once('@').map_or(name, |(base, _)| base);
    ApiFunc::from_symbol(base).is_some_and(|f| f.op() == Op::Register)
}

/// What the registration calls of one file say.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Registrations {
    /// Launch handle (virtual address in the file) -> mangled kernel name.
    pub by_handle: HashMap<u64, String>,
    /// Calls to a registration function found in the code.
    pub calls: usize,
    /// Of those, the calls (their addresses) whose handle or name was not loaded by a plain `lea`/`mov`
    /// before the call (at most [`MAX_SITES`]).
    pub unresolved: Vec<u64>,
    /// Why the code was not read in full ([`reading::Budget`]); None: it was.
    pub cut: Option<&'static str>,
}

/// Text is decoded in windows of this size, read one at a time from the file.
const WINDOW: usize = 4 << 20;
/// The longest x86-64 instruction: a window stops this short of its end, unless it ends the section.
const MAX_INSN: usize = 15;

/// Decodes the registration calls of an x86-64 ELF file; None when it is no such file or imports no
/// registration function. Within a file's budget, drawn from the recording's ([`Budget::file`]).
pub(crate) fn decode(file: &CodeFile) -> Option<Registrations> {
    decode_within(file, &mut Budget::file())
}

/// The same within `budget`.
///
/// The file is read in bounded pieces: its dynamic tables through [`crate::os::files::Bounded`], its code one
/// window at a time, each byte once, charged to `budget`; at most [`MAX_SITES`] calls are kept.
pub(crate) fn decode_within(file: &CodeFile, budget: &mut Budget) -> Option<Registrations> {
    let view = file.elf();
    let elf = crate::os::elf::parse(&view)?;
    if elf.architecture() != object::Architecture::X86_64 {
        return None;
    }
    let slots = got_slots(&elf);
    if slots.is_empty() {
        return None;
    }
    let stubs = plt_stubs(file, &elf, &slots, budget);
    let got = got_values(&elf, budget);
    let mut out = Registrations::default();
    let mut info = InstructionInfoFactory::new();
    let mut known: HashMap<Register, u64> = HashMap::new();
    let mut names: Vec<(u64, u64, u64)> = Vec::new();
    each_instruction(file, &elf, budget, |insn, new_section, _| {
        if new_section {
            known.clear();
        }
        if insn.mnemonic() == Mnemonic::Call && is_registration_call(insn, &stubs, &slots) {
            out.calls += 1;
            let handle = known.get(&Register::RSI).copied();
            let name = known.get(&Register::RCX).or_else(|| known.get(&Register::RDX)).copied();
            match (handle, name) {
                (Some(h), Some(n)) if names.len() < MAX_SITES => names.push((insn.ip(), h, n)),
                _ if out.unresolved.len() < MAX_SITES => out.unresolved.push(insn.ip()),
                _ => {}
            }
        }
        track(insn, &mut info, &got, &mut known);
    });
    if names.len() >= MAX_SITES || out.unresolved.len() >= MAX_SITES {
        budget.stop(reading::CUT_SITES);
    }
    // The names read once the code is walked: each string's read charged to the budget.
    let sections = string_sections(&elf);
    for (call, handle, at) in names {
        match c_string(&sections, file, at, budget) {
            Some(n) if !n.is_empty() => {
                out.by_handle.insert(handle, n);
            }
            _ if out.unresolved.len() < MAX_SITES => out.unresolved.push(call),
            _ => {}
        }
    }
    out.cut = budget.cut;
    Some(out)
}

/// The code ranges of the sections of `kind` or named `.plt*` (file offset, size, address): each byte once
/// however many section headers cover it, at most [`reading::MAX_CODE_SECTIONS`] ranges.
fn ranges<'d, R: ReadRef<'d>>(
    elf: &object::File<'d, R>,
    budget: &mut Budget,
    take: impl Fn(&object::Section<'d, '_, R>) -> bool,
) -> Vec<(u64, u64, u64)> {
    let sections = elf.sections().filter(|s| take(s)).filter_map(|s| {
        let (offset, size) = s.file_range()?;
        Some((offset, size, s.address()))
    });
    // Headers kept to merge: a file may claim 65 535; past the ranges' cap, the rest are left (and said).
    let all: Vec<_> = sections.take(MAX_SITES).collect();
    reading::code_ranges(all, budget)
}

/// Decodes every instruction of an x86-64 ELF file's code sections in order, handing each to `f` (with
/// `true` for the first of a range, and the budget). The code is read one bounded window at a time, each
/// byte once ([`reading::code_ranges`]), each window charged to `budget`: past it the walk stops.
pub(crate) fn each_instruction<'d, R: ReadRef<'d>>(
    file: &CodeFile,
    elf: &object::File<'d, R>,
    budget: &mut Budget,
    mut f: impl FnMut(&Instruction, bool, &mut Budget),
) {
    let mut window = Vec::new();
    for (offset, size, address) in ranges(elf, budget, |s| s.kind() == SectionKind::Text) {
        let mut done = 0u64;
        let mut first = true;
        while done < size {
            let n = (size - done).min(WINDOW as u64) as usize;
            if budget.cut.is_some() || !budget.take(n as u64) {
                return;
            }
            window.resize(n, 0);
            if file.read_exact_at(offset + done, &mut window).is_err() {
                break;
            }
            let last = done + n as u64 == size;
            let mut decoder = Decoder::with_ip(64, &window, address.wrapping_add(done), DecoderOptions::NONE);
            let mut insn = Instruction::default();
            // Stop where an instruction could cross the window's end; the next window starts there.
            while decoder.can_decode() && (last || decoder.position() + MAX_INSN <= n) {
                decoder.decode_out(&mut insn);
                f(&insn, first, budget);
                first = false;
            }
            done += decoder.position() as u64;
            if decoder.position() == 0 {
                break; // nothing decodable: a window shorter than an instruction at a section's end
            }
        }
    }
}

/// GOT slots the dynamic linker fills with a registration function's address.
fn got_slots<'d, R: ReadRef<'d>>(file: &object::File<'d, R>) -> HashSet<u64> {
    let Some(dynsym) = file.dynamic_symbol_table() else { return HashSet::new() };
    let Some(relocations) = file.dynamic_relocations() else { return HashSet::new() };
    relocations
        .filter_map(|(offset, r)| match r.target() {
            RelocationTarget::Symbol(i) => {
                let name = dynsym.symbol_by_index(i).ok()?.name().ok()?;
                is_registration_symbol(name).then_some(offset)
            }
            _ => None,
        })
        .collect()
}

/// Relocations [`got_values`] keeps at most (Debian's `libggml-hip.so` has 8 000).
const MAX_RELOCATIONS: usize = 1 << 18;

/// What the dynamic linker writes into each GOT slot that holds an address of this file: a relative
/// relocation's addend, or the address of a symbol the file defines. (An exported kernel's handle is
/// loaded through the GOT: `mov rsi, [rip+slot]`.) At most [`MAX_RELOCATIONS`] (the budget stopped past).
pub(crate) fn got_values<'d, R: ReadRef<'d>>(file: &object::File<'d, R>, budget: &mut Budget) -> HashMap<u64, u64> {
    let Some(relocations) = file.dynamic_relocations() else { return HashMap::new() };
    let dynsym = file.dynamic_symbol_table();
    let mut seen = 0usize;
    let values: HashMap<u64, u64> = relocations
        .take_while(|_| {
            seen += 1;
            seen <= MAX_RELOCATIONS
        })
        .filter_map(|(offset, r)| {
            let value = match r.target() {
                RelocationTarget::Absolute => r.addend() as u64,
                RelocationTarget::Symbol(i) => {
                    let s = dynsym.as_ref()?.symbol_by_index(i).ok()?;
                    if s.is_undefined() {
                        return None;
                    }
                    s.address().wrapping_add(r.addend() as u64)
                }
                _ => return None,
            };
            Some((offset, value))
        })
        .collect();
    if seen > MAX_RELOCATIONS {
        budget.stop(reading::CUT_SITES);
    }
    values
}

/// Entry points of the PLT stubs that jump through those slots (`jmp [rip+slot]`, preceded by
/// `endbr64` in `.plt.sec` stubs).
/// Each byte once, charged to the budget; at most [`MAX_SITES`] stubs.
fn plt_stubs<'d, R: ReadRef<'d>>(
    file: &CodeFile,
    elf: &object::File<'d, R>,
    slots: &HashSet<u64>,
    budget: &mut Budget,
) -> HashSet<u64> {
    let mut stubs = HashSet::new();
    let plt = ranges(elf, budget, |s| s.name().is_ok_and(|n| n.starts_with(".plt")));
    for (offset, size, address) in plt {
        // A PLT is a few KiB (16 bytes a stub); one larger than a window is no PLT.
        if size > WINDOW as u64 || !budget.take(size) {
            continue;
        }
        let Ok(code) = file.read_vec(offset, size, WINDOW as u64, "PLT") else { continue };
        let mut decoder = Decoder::with_ip(64, &code, address, DecoderOptions::NONE);
        let mut previous = Instruction::default();
        let mut insn = Instruction::default();
        while decoder.can_decode() {
            decoder.decode_out(&mut insn);
            if insn.mnemonic() == Mnemonic::Jmp
                && insn.is_ip_rel_memory_operand()
                && slots.contains(&insn.ip_rel_memory_address())
            {
                if stubs.len() >= MAX_SITES {
                    budget.stop(reading::CUT_SITES);
                    return stubs;
                }
                stubs.insert(insn.ip());
                if previous.mnemonic() == Mnemonic::Endbr64 && previous.next_ip() == insn.ip() {
                    stubs.insert(previous.ip());
                }
            }
            previous = insn;
        }
    }
    stubs
}

fn is_registration_call(insn: &Instruction, stubs: &HashSet<u64>, slots: &HashSet<u64>) -> bool {
    match insn.op0_kind() {
        OpKind::NearBranch64 => stubs.contains(&insn.near_branch_target()),
        // `-fno-plt`: call [rip+slot].
        OpKind::Memory if insn.is_ip_rel_memory_operand() => slots.contains(&insn.ip_rel_memory_address()),
        _ => false,
    }
}

/// Follows the addresses straight-line code loads into registers: `lea r, [rip+x]`, `mov r, imm`,
/// `mov r, [rip+got_slot]` and register copies. Any other write to a register forgets it; any transfer of control forgets all.
fn track(
    insn: &Instruction,
    info: &mut InstructionInfoFactory,
    got: &HashMap<u64, u64>,
    known: &mut HashMap<Register, u64>,
) {
    follow(insn, info, known, |known| match insn.mnemonic() {
        Mnemonic::Lea if insn.is_ip_rel_memory_operand() => Some(insn.ip_rel_memory_address()),
        Mnemonic::Mov => match insn.op1_kind() {
            OpKind::Register => known.get(&insn.op1_register().full_register()).copied(),
            OpKind::Immediate32 | OpKind::Immediate32to64 | OpKind::Immediate64 => Some(insn.immediate(1)),
            OpKind::Memory if insn.is_ip_rel_memory_operand() => got.get(&insn.ip_rel_memory_address()).copied(),
            _ => None,
        },
        _ => None,
    });
}

/// One step of following values through straight-line code, as this crate's call-site decoders do: any transfer of
/// control forgets every register; an instruction that writes a register forgets it, then, when its destination
/// is a register, keeps what `loads` says the instruction puts there (given what is known before it).
pub(crate) fn follow<V: Copy>(
    insn: &Instruction,
    info: &mut InstructionInfoFactory,
    known: &mut HashMap<Register, V>,
    loads: impl FnOnce(&HashMap<Register, V>) -> Option<V>,
) {
    if insn.flow_control() != FlowControl::Next {
        known.clear();
        return;
    }
    let dst = (insn.op_count() > 0 && insn.op0_kind() == OpKind::Register).then(|| insn.op0_register().full_register());
    let value = dst.and_then(|_| loads(known));
    forget_written(insn, info, known);
    if let (Some(d), Some(v)) = (dst, value) {
        known.insert(d, v);
    }
}

/// Forgets what `known` held for every register `insn` writes (its full 64-bit register), as the decoders of
/// this crate that follow register values through straight-line code need before they store the new one.
pub(crate) fn forget_written<V>(
    insn: &Instruction,
    info: &mut InstructionInfoFactory,
    known: &mut HashMap<Register, V>,
) {
    for used in info.info(insn).used_registers() {
        if matches!(
            used.access(),
            OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
        ) {
            known.remove(&used.register().full_register());
        }
    }
}

/// Sections with bytes in the file a string is looked for in at most (a real library has about 40).
const MAX_STRING_SECTIONS: usize = 1024;

/// The sections holding bytes of the file, by address (address, size, file offset): each once however
/// many headers repeat it, at most [`MAX_STRING_SECTIONS`] (past them a string is not found).
pub(crate) fn string_sections<'d, R: ReadRef<'d>>(elf: &object::File<'d, R>) -> Vec<(u64, u64, u64)> {
    let mut all: Vec<(u64, u64, u64)> = elf
        .sections()
        .take(MAX_SITES)
        .filter_map(|s| s.file_range().map(|(offset, size)| (s.address(), size, offset)))
        .collect();
    all.sort_unstable();
    all.dedup();
    all.truncate(MAX_STRING_SECTIONS);
    all
}

/// The NUL-terminated string at a virtual address of the file, at most 4 KiB, read from the file: 256 bytes
/// first (a kernel's or pipeline's name fits), the rest only where no NUL came; each read charged to `budget`.
pub(crate) fn c_string(
    sections: &[(u64, u64, u64)],
    file: &CodeFile,
    addr: u64,
    budget: &mut Budget,
) -> Option<String> {
    let &(address, size, offset) = sections.iter().find(|&&(a, size, _)| addr >= a && addr - a < size)?;
    let within = addr - address;
    let at = offset.checked_add(within)?;
    let mut buf = [0u8; 4096];
    let room = size.checked_sub(within)?.min(buf.len() as u64) as usize;
    let first = room.min(256);
    if !budget.take(first as u64) {
        return None;
    }
    file.read_exact_at(at, &mut buf[..first]).ok()?;
    let end = if let Some(end) = buf[..first].iter().position(|&b| b == 0) {
        end
    } else {
        if !budget.take((room - first) as u64) {
            return None;
        }
        file.read_exact_at(at.checked_add(first as u64)?, &mut buf[first..room]).ok()?;
        buf[..room].iter().position(|&b| b == 0)?
    };
    String::from_utf8(buf[..end].to_vec()).ok()
}
