//! Where one build of libllama keeps `llama_batch_ext`'s fields, read from its own code.
//!
//! The layout changes between llama.cpp releases (the pinned release's token is 96 bytes, Debian's 0.7.0's
//! 112 with every field 16 bytes further and the vector 8 further), so no constant serves. Three small
//! methods every build exports say it, each storing into or pointing at `tokens[idx]`:
//! `set_output(idx, bool)` stores the output byte, `set_token_pos(idx, pos*)` stores the first position,
//! `add_seq(idx, seq)` passes the token's sequence set to the set's insert. A few dozen instructions of
//! each are followed symbolically (every branch, at most [`STEPS`] instructions): `this` in `rdi`, `idx` in
//! `esi`, a load of `[this + v]` is the vector's data pointer, and an address `data + idx * size + field`
//! gives the vector's offset, the token's size and the field. The three must agree on the vector and the
//! size, or there is no layout (and the library's `llama_process` is left unprobed, never read at a
//! guessed offset). A leaf: bytes in, a layout out.

use std::collections::{HashMap, HashSet};

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpKind, Register};
use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
use tracer_common::ExtLayout;

use crate::os::files::CodeFile;

/// The three methods, by mangled name (the Itanium C++ ABI every x86-64 Linux compiler uses).
pub(crate) const SET_OUTPUT: &str = "_ZN15llama_batch_ext10set_outputEib";
pub(crate) const SET_TOKEN_POS: &str = "_ZN15llama_batch_ext13set_token_posEiPKi";
pub(crate) const ADD_SEQ: &str = "_ZN15llama_batch_ext7add_seqEii";

/// Bytes of a method read at most.
const CODE_MAX: usize = 1024;
/// Instructions followed per method at most, over all its paths.
const STEPS: usize = 256;

/// A register's value, as far as the methods need: `this`, or `[this + base] + idx * scale + disp`
/// (`base` absent: `idx * scale + disp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    This,
    Lin { base: Option<u64>, scale: i64, disp: i64 },
}

const IDX: Val = Val::Lin { base: None, scale: 1, disp: 0 };

impl Val {
    const fn constant(c: i64) -> Self {
        Self::Lin { base: None, scale: 0, disp: c }
    }

    fn add(self, other: Self) -> Option<Self> {
        match (self, other) {
            (Self::Lin { base: left, scale: ls, disp: ld }, Self::Lin { base: right, scale: rs, disp: rd }) => {
                let base = match (left, right) {
                    (Some(_), Some(_)) => return None,
                    (left, right) => left.or(right),
                };
                Some(Self::Lin { base, scale: ls.checked_add(rs)?, disp: ld.checked_add(rd)? })
            }
            _ => None,
        }
    }

    fn times(self, k: i64) -> Option<Self> {
        match self {
            Self::Lin { base: None, scale, disp } => {
                Some(Self::Lin { base: None, scale: scale.checked_mul(k)?, disp: disp.checked_mul(k)? })
            }
            _ => None,
        }
    }

    /// `(vector, token size, field)` when this is the address of a field of `tokens[idx]`.
    fn element(self) -> Option<(u64, u64, u64)> {
        match self {
            Self::Lin { base: Some(v), scale, disp } if scale > 0 && disp >= 0 => {
                Some((v, u64::try_from(scale).ok()?, u64::try_from(disp).ok()?))
            }
            _ => None,
        }
    }
}

/// What a method does with `tokens[idx]`: stores of a width (bytes) and calls given a field's address.
#[derive(Debug, Default, PartialEq, Eq)]
struct Uses {
    stores: Vec<(u64, u64, u64, usize)>,
    passed: Vec<(u64, u64, u64)>,
}

/// The layout of the library, or None when it lacks one of the methods or they do not agree.
pub(crate) fn read(file: &CodeFile) -> Option<ExtLayout> {
    let view = file.elf();
    let elf = crate::os::elf::parse(&view)?;
    if elf.architecture() != object::Architecture::X86_64 {
        return None;
    }
    let mut code: HashMap<&str, (u64, Vec<u8>)> = HashMap::new();
    for sym in elf.dynamic_symbols().chain(elf.symbols()) {
        let Ok(name) = sym.name() else { continue };
        if ![SET_OUTPUT, SET_TOKEN_POS, ADD_SEQ].contains(&name) || code.contains_key(name) || sym.is_undefined() {
            continue;
        }
        let Some(section) = sym.section_index().and_then(|i| elf.section_by_index(i).ok()) else { continue };
        let Some((sec_off, sec_size)) = section.file_range() else { continue };
        let Some(within) = sym.address().checked_sub(section.address()).filter(|&w| w < sec_size) else { continue };
        let len = sym.size().min(sec_size - within).min(CODE_MAX as u64) as usize;
        let mut bytes = vec![0; len];
        let Some(at) = sec_off.checked_add(within) else { continue };
        if file.read_exact_at(at, &mut bytes).is_err() {
            continue;
        }
        let key = [SET_OUTPUT, SET_TOKEN_POS, ADD_SEQ].into_iter().find(|&k| k == name)?;
        code.insert(key, (sym.address(), bytes));
    }
    let method = |name: &str| code.get(name).map(|(ip, bytes)| (*ip, bytes.as_slice()));
    from_code(method(SET_OUTPUT)?, method(SET_TOKEN_POS)?, method(ADD_SEQ)?)
}

/// The layout the three methods' code (address, bytes) says, checked for agreement.
pub(crate) fn from_code(
    set_output: (u64, &[u8]),
    set_token_pos: (u64, &[u8]),
    add_seq: (u64, &[u8]),
) -> Option<ExtLayout> {
    let one = |found: Vec<(u64, u64, u64)>| -> Option<(u64, u64, u64)> {
        let first = *found.first()?;
        found.iter().all(|&f| f == first).then_some(first)
    };
    let out = follow(set_output.0, set_output.1);
    let (tokens, token_bytes, output) = one(out.stores.iter().filter(|s| s.3 == 1).map(|s| (s.0, s.1, s.2)).collect())?;
    let pos = follow(set_token_pos.0, set_token_pos.1);
    let pos_stores: Vec<_> = pos.stores.iter().filter(|s| s.3 == 4).collect();
    if pos_stores.is_empty() || pos_stores.iter().any(|s| (s.0, s.1) != (tokens, token_bytes)) {
        return None;
    }
    let first_pos = pos_stores.iter().map(|s| s.2).min()?;
    let (v, size, seq_set) = one(follow(add_seq.0, add_seq.1).passed)?;
    if (v, size) != (tokens, token_bytes) {
        return None;
    }
    let layout = ExtLayout { tokens, token_bytes, output, seq_set, pos: first_pos };
    layout.fits().then_some(layout)
}

/// Follows every path of a method from its first instruction (`rdi` = this, `rsi` = idx), at most
/// [`STEPS`] instructions, each address once; what it stores into and passes of `tokens[idx]`.
fn follow(ip: u64, code: &[u8]) -> Uses {
    let end = ip.saturating_add(code.len() as u64);
    let mut uses = Uses::default();
    let mut info = InstructionInfoFactory::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let start: HashMap<Register, Val> = [(Register::RDI, Val::This), (Register::RSI, IDX)].into_iter().collect();
    let mut paths = vec![(ip, start)];
    let mut steps = 0;
    while let Some((at, mut regs)) = paths.pop() {
        let mut at = at;
        loop {
            if at < ip || at >= end || !seen.insert(at) || steps >= STEPS {
                break;
            }
            steps += 1;
            let Ok(from) = usize::try_from(at - ip) else { break };
            let mut decoder = Decoder::with_ip(64, &code[from..], at, DecoderOptions::NONE);
            let insn = decoder.decode();
            if insn.is_invalid() {
                break;
            }
            at = insn.next_ip();
            match insn.flow_control() {
                FlowControl::Next => step(&insn, &mut info, &mut regs, &mut uses),
                FlowControl::ConditionalBranch => {
                    if insn.op0_kind() == OpKind::NearBranch64 {
                        paths.push((insn.near_branch_target(), regs.clone()));
                    }
                }
                FlowControl::UnconditionalBranch if insn.op0_kind() == OpKind::NearBranch64 => {
                    at = insn.near_branch_target();
                }
                FlowControl::Call => {
                    if let Some(e) = regs.get(&Register::RDI).and_then(|v| v.element()) {
                        uses.passed.push(e);
                    }
                    // The callee may change every caller-saved register.
                    for r in [
                        Register::RAX,
                        Register::RCX,
                        Register::RDX,
                        Register::RSI,
                        Register::RDI,
                        Register::R8,
                        Register::R9,
                        Register::R10,
                        Register::R11,
                    ] {
                        regs.remove(&r);
                    }
                }
                _ => break, // a return, an indirect jump, an interrupt
            }
        }
    }
    uses
}

/// One straight-line instruction: the store it makes into `tokens[idx]`, and its register's new value.
fn step(insn: &Instruction, info: &mut InstructionInfoFactory, regs: &mut HashMap<Register, Val>, uses: &mut Uses) {
    let reg = |r: Register| regs.get(&r.full_register()).copied();
    let address = |insn: &Instruction| -> Option<Val> {
        if insn.is_ip_rel_memory_operand() || insn.segment_prefix() != Register::None {
            return None;
        }
        let mut v = Val::constant(insn.memory_displacement64() as i64);
        if insn.memory_base() != Register::None {
            v = v.add(reg(insn.memory_base())?)?;
        }
        if insn.memory_index() != Register::None {
            v = v.add(reg(insn.memory_index())?.times(i64::from(insn.memory_index_scale()))?)?;
        }
        Some(v)
    };
    if insn.op_count() > 0 && insn.op0_kind() == OpKind::Memory && insn.mnemonic() == Mnemonic::Mov {
        if let Some(e) = address(insn).and_then(Val::element) {
            uses.stores.push((e.0, e.1, e.2, insn.memory_size().size()));
        }
        return;
    }
    let dst = (insn.op_count() > 0 && insn.op0_kind() == OpKind::Register).then(|| insn.op0_register());
    let value = dst.and_then(|d| {
        let wide = d.size() == 8;
        // A 32-bit write zero-extends: it keeps `idx` (a non-negative int) and nothing else.
        let keep = |v: Val| (wide || v == IDX).then_some(v);
        match insn.mnemonic() {
            Mnemonic::Mov | Mnemonic::Movsxd => match insn.op1_kind() {
                OpKind::Register => reg(insn.op1_register()).and_then(keep),
                // `[this + disp]`: a field of the batch (the vector's data pointer, where the code is ours).
                OpKind::Memory
                    if wide
                        && insn.memory_index() == Register::None
                        && !insn.is_ip_rel_memory_operand()
                        && reg(insn.memory_base()) == Some(Val::This) =>
                {
                    Some(Val::Lin { base: Some(insn.memory_displacement64()), scale: 0, disp: 0 })
                }
                OpKind::Immediate32 | OpKind::Immediate32to64 | OpKind::Immediate64 if wide => {
                    Some(Val::constant(insn.immediate(1) as i64))
                }
                _ => None,
            },
            Mnemonic::Lea if wide => address(insn),
            Mnemonic::Imul if wide && insn.op_count() == 3 => {
                let src = match insn.op1_kind() {
                    OpKind::Register => reg(insn.op1_register())?,
                    _ => return None,
                };
                src.times(insn.immediate(2) as i64)
            }
            Mnemonic::Shl if wide && insn.op1_kind() == OpKind::Immediate8 => {
                reg(d)?.times(1i64.checked_shl(u32::from(insn.immediate8()).min(62))?)
            }
            Mnemonic::Add if wide => match insn.op1_kind() {
                OpKind::Register => reg(d)?.add(reg(insn.op1_register())?),
                OpKind::Immediate8to64 | OpKind::Immediate32to64 => {
                    reg(d)?.add(Val::constant(insn.immediate(1) as i64))
                }
                _ => None,
            },
            _ => None,
        }
    });
    crate::record::names::registration::forget_written(insn, info, regs);
    if let (Some(d), Some(v)) = (dst, value) {
        regs.insert(d.full_register(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Debian unstable's libllama 0.7.0 (`libllama0` 1:0.7.0+dfsg-2): the three methods whole, at their
    // addresses, as its dynamic symbols give them.
    const DEBIAN_SET_OUTPUT: (u64, &[u8]) = (
        0x1eb180,
        &[
            0xf3, 0x0f, 0x1e, 0xfa, 0x89, 0xd1, 0x85, 0xf6, 0x78, 0x2e, 0x48, 0x8b, 0x57, 0x48, 0x48, 0x8b, 0x47, 0x50,
            0x48, 0x29, 0xd0, 0x48, 0xc1, 0xf8, 0x04, 0x69, 0xc0, 0xb7, 0x6d, 0xdb, 0xb6, 0x39, 0xf0, 0x7e, 0x15, 0x89,
            0xf6, 0xb8, 0x01, 0x00, 0x00, 0x00, 0x48, 0x6b, 0xf6, 0x70, 0x88, 0x4c, 0x32, 0x20, 0xc3, 0x0f, 0x1f, 0x44,
            0x00, 0x00, 0x31, 0xc0, 0xc3,
        ],
    );
    const DEBIAN_SET_TOKEN_POS: (u64, &[u8]) = (
        0x1eb100,
        &[
            0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89, 0xd1, 0x85, 0xf6, 0x78, 0x3d, 0x48, 0x8b, 0x57, 0x48, 0x48, 0x8b, 0x47,
            0x50, 0x48, 0x29, 0xd0, 0x48, 0xc1, 0xf8, 0x04, 0x69, 0xc0, 0xb7, 0x6d, 0xdb, 0xb6, 0x39, 0xf0, 0x7e, 0x24,
            0x48, 0x85, 0xc9, 0x74, 0x1f, 0x89, 0xf6, 0x48, 0x6b, 0xf6, 0x70, 0x48, 0x01, 0xf2, 0x83, 0x3a, 0xff, 0x74,
            0x19, 0x8b, 0x01, 0x89, 0x42, 0x60, 0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00,
            0x31, 0xc0, 0xc3, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x48, 0x8b, 0x7f, 0x38, 0x48, 0x85, 0xff, 0x74, 0xe3, 0x31,
            0xc0, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x8b, 0x34, 0x81, 0x89, 0x74, 0x82, 0x60, 0x48, 0x83, 0xc0, 0x01, 0x48,
            0x39, 0xc7, 0x75, 0xf0, 0xeb, 0xca,
        ],
    );
    const DEBIAN_ADD_SEQ: (u64, &[u8]) = (
        0x1f27c0,
        &[
            0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x18, 0x89, 0x54, 0x24, 0x0c, 0x85, 0xf6, 0x78, 0x26, 0x48, 0x8b,
            0x57, 0x48, 0x48, 0x8b, 0x47, 0x50, 0x48, 0x29, 0xd0, 0x48, 0xc1, 0xf8, 0x04, 0x69, 0xc0, 0xb7, 0x6d, 0xdb,
            0xb6, 0x39, 0xf0, 0x7e, 0x0d, 0x8b, 0x44, 0x24, 0x0c, 0x85, 0xc0, 0x78, 0x05, 0x3b, 0x47, 0x20, 0x7c, 0x0a,
            0x31, 0xc0, 0x48, 0x83, 0xc4, 0x18, 0xc3, 0x0f, 0x1f, 0x00, 0x89, 0xf0, 0x48, 0x8d, 0x74, 0x24, 0x0c, 0x48,
            0x6b, 0xc0, 0x70, 0x48, 0x8d, 0x7c, 0x02, 0x28, 0xe8, 0x6b, 0xfe, 0xff, 0xff, 0xb8, 0x01, 0x00, 0x00, 0x00,
            0x48, 0x83, 0xc4, 0x18, 0xc3,
        ],
    );

    // The pinned release (llama-cpp-python 0.3.36's llama.cpp): `src/llama-batch.cpp` built by Debian 12's
    // g++ 12 -O2 -fPIC, which scales the index by `lea (rsi,rsi,2)` then `shl 5`.
    const PINNED_SET_OUTPUT: (u64, &[u8]) = (
        0x6b30,
        &[
            0x31, 0xc9, 0x85, 0xf6, 0x78, 0x2e, 0x4c, 0x8b, 0x47, 0x40, 0x48, 0x8b, 0x47, 0x48, 0x4c, 0x29, 0xc0, 0x48,
            0xc1, 0xf8, 0x05, 0x69, 0xc0, 0xab, 0xaa, 0xaa, 0xaa, 0x39, 0xf0, 0x7e, 0x15, 0x48, 0x63, 0xf6, 0xb9, 0x01,
            0x00, 0x00, 0x00, 0x48, 0x8d, 0x04, 0x76, 0x48, 0xc1, 0xe0, 0x05, 0x41, 0x88, 0x54, 0x00, 0x10, 0x89, 0xc8,
            0xc3,
        ],
    );
    const PINNED_SET_TOKEN_POS: (u64, &[u8]) = (
        0x6aa0,
        &[
            0x48, 0x89, 0xf9, 0x31, 0xc0, 0x85, 0xf6, 0x78, 0x47, 0x48, 0x8b, 0x7f, 0x40, 0x48, 0x8b, 0x41, 0x48, 0x48,
            0x29, 0xf8, 0x48, 0xc1, 0xf8, 0x05, 0x69, 0xc0, 0xab, 0xaa, 0xaa, 0xaa, 0x39, 0xf0, 0x7e, 0x36, 0x48, 0x85,
            0xd2, 0x74, 0x31, 0x48, 0x63, 0xf6, 0x48, 0x8d, 0x04, 0x76, 0x48, 0xc1, 0xe0, 0x05, 0x48, 0x8d, 0x34, 0x07,
            0x83, 0x3e, 0xff, 0x74, 0x25, 0x8b, 0x02, 0x89, 0x46, 0x50, 0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3, 0x66, 0x2e,
            0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc3, 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00, 0x31, 0xc0,
            0xc3, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x48, 0x8b, 0x79, 0x30, 0x48, 0x85, 0xff, 0x74, 0xd7, 0x31, 0xc0, 0x0f,
            0x1f, 0x44, 0x00, 0x00, 0x8b, 0x0c, 0x82, 0x89, 0x4c, 0x86, 0x50, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xf8,
            0x72, 0xf0, 0xeb, 0xbe,
        ],
    );
    const PINNED_ADD_SEQ: (u64, &[u8]) = (
        0xc2b0,
        &[
            0x48, 0x83, 0xec, 0x18, 0x89, 0x54, 0x24, 0x0c, 0x31, 0xd2, 0x85, 0xf6, 0x78, 0x26, 0x48, 0x8b, 0x4f, 0x40,
            0x48, 0x8b, 0x47, 0x48, 0x48, 0x29, 0xc8, 0x48, 0xc1, 0xf8, 0x05, 0x69, 0xc0, 0xab, 0xaa, 0xaa, 0xaa, 0x39,
            0xf0, 0x7e, 0x0d, 0x8b, 0x44, 0x24, 0x0c, 0x85, 0xc0, 0x78, 0x05, 0x3b, 0x47, 0x18, 0x7c, 0x0c, 0x89, 0xd0,
            0x48, 0x83, 0xc4, 0x18, 0xc3, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x48, 0x63, 0xf6, 0x48, 0x8d, 0x54, 0x24, 0x0c,
            0x48, 0x8d, 0x04, 0x76, 0x48, 0x89, 0xd6, 0x48, 0xc1, 0xe0, 0x05, 0x48, 0x8d, 0x7c, 0x01, 0x18, 0xe8, 0x13,
            0xfe, 0xff, 0xff, 0xba, 0x01, 0x00, 0x00, 0x00, 0x48, 0x83, 0xc4, 0x18, 0x89, 0xd0, 0xc3,
        ],
    );

    #[test]
    fn debian_s_libllama_0_7_0_lays_its_tokens_out_at_112_bytes() {
        let l = from_code(DEBIAN_SET_OUTPUT, DEBIAN_SET_TOKEN_POS, DEBIAN_ADD_SEQ);
        assert_eq!(l, Some(ExtLayout { tokens: 0x48, token_bytes: 0x70, output: 0x20, seq_set: 0x28, pos: 0x60 }));
    }

    /// The layout tracer's probe had as constants before it read layouts from the code.
    #[test]
    fn the_pinned_release_lays_its_tokens_out_at_96_bytes() {
        let l = from_code(PINNED_SET_OUTPUT, PINNED_SET_TOKEN_POS, PINNED_ADD_SEQ);
        assert_eq!(l, Some(ExtLayout { tokens: 64, token_bytes: 96, output: 16, seq_set: 24, pos: 80 }));
    }

    #[test]
    fn methods_that_disagree_or_say_nothing_give_no_layout() {
        let (ip, code) = DEBIAN_ADD_SEQ;
        // add_seq cut before its call: no set passed.
        assert_eq!(from_code(DEBIAN_SET_OUTPUT, DEBIAN_SET_TOKEN_POS, (ip, &code[..80])), None);
        // set_output's code in place of set_token_pos: no 4-byte store.
        assert_eq!(from_code(DEBIAN_SET_OUTPUT, DEBIAN_SET_OUTPUT, DEBIAN_ADD_SEQ), None);
        // Two builds mixed: their vectors and token sizes differ.
        assert_eq!(from_code(DEBIAN_SET_OUTPUT, PINNED_SET_TOKEN_POS, PINNED_ADD_SEQ), None);
        // Nothing decodable.
        assert_eq!(from_code((0, &[0xff; 16]), (0, &[]), (0, &[0x0f])), None);
    }

    #[test]
    fn a_layout_round_trips_through_the_cookie_and_one_that_does_not_fit_is_refused() {
        let l = ExtLayout { tokens: 0x48, token_bytes: 0x70, output: 0x20, seq_set: 0x28, pos: 0x60 };
        let c = tracer_common::cookie::make(3, 225, l.cookie_bits().expect("fits"));
        assert_eq!(ExtLayout::of_cookie(c), Some(l));
        assert_eq!(tracer_common::cookie::lib(c), 3);
        assert_eq!(ExtLayout::of_cookie(tracer_common::cookie::make(3, 225, 0)), None);
        assert_eq!(ExtLayout { seq_set: 0x70, ..l }.cookie_bits(), None, "the set past the token's end");
        assert_eq!(ExtLayout { token_bytes: 1024, ..l }.cookie_bits(), None, "a token larger than the probe's buffer");
    }
}
