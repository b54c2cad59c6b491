//! ggml-vulkan's shaders named from the library's own code, for copies without a symbol table.
//!
//! ggml's Vulkan backend makes every pipeline through one function (a lambda of `ggml_vk_load_shaders`):
//! `ggml_vk_create_pipeline(device, pipeline, "rms_norm_f32", rms_norm_f32_len, rms_norm_f32_data, "main",
//! ...)`. Each call site loads the name's address and the SPIR-V array's into argument registers right
//! before the call (`lea rcx, [rip+name]`, `lea r9, [rip+array]`), or the array from a table of arrays
//! (`arr_dmmv_q4_k_f32_f32_data[i]`: `mov r9, [rax+r14*8]` after `lea rax, [rip+table]`). Decoding those
//! sites recovers array -> pipeline name where the file keeps no `*_data` symbols, as Debian's
//! `libggml0-backend-vulkan` does not.
//!
//! Which function creates pipelines is read from the sites themselves: a call target is one when at
//! least [`MIN_SITES`] of its calls pass a name string and a SPIR-V array (its magic at the address) in the
//! same two argument registers; only those calls name arrays. An array passed under several names (ggml
//! makes `rms_norm_f32` and `rms_norm_mul_f32` from one module with other specialization constants) has
//! them all. A name ggml builds at run time (`std::string` pieces, a name held in a string object) is in no
//! register as a string: such calls are counted and their arrays stay unnamed, never guessed. A leaf: bytes
//! in, a table out.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use iced_x86::{Instruction, InstructionInfoFactory, Mnemonic, OpKind, Register};
use object::{Object as _, ObjectSymbol as _, ReadRef};

use super::{
    reading::{self, Budget, MAX_SITES},
    registration::{c_string, each_instruction, follow, got_values, string_sections},
};
use crate::os::files::CodeFile;

/// Calls with a name and a SPIR-V array in the same two registers that make a call target ggml's
/// pipeline-creating function.
const MIN_SITES: usize = 16;
/// Entries of a table of arrays read at most.
const MAX_TABLE: u64 = 64;
/// SPIR-V's magic number, the first word of every module.
const SPIRV_MAGIC: u32 = 0x0723_0203;
/// The System V argument registers, in order.
const ARGS: [Register; 6] = [Register::RDI, Register::RSI, Register::RDX, Register::RCX, Register::R8, Register::R9];

/// What the pipeline-creating calls of one file say.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Created {
    /// SPIR-V array (virtual address) -> the pipeline names it is created under.
    pub by_array: BTreeMap<u64, BTreeSet<String>>,
    /// Calls to the creating function(s) that pass a SPIR-V array.
    pub calls: usize,
    /// Of those, the calls whose name is no string of the file (built at run time): their arrays, unless
    /// named by another call, stay unnamed.
    pub unnamed_calls: usize,
    /// Why the code was not read in full ([`reading::Budget`]); None: it was.
    pub cut: Option<&'static str>,
}

/// Program headers a SPIR-V address is looked for in at most (a real library has 4 loadable ones).
const MAX_SEGMENTS: usize = 64;

/// What straight-line code has put in a register: an address, or the address of a table of addresses
/// indexed by another register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    Addr(u64),
    Table(u64),
}

/// One call that passes a SPIR-V array: its target, the array's register and what it holds, and the name
/// string's register and text when one argument register holds one.
struct Site {
    target: u64,
    array: (Register, Value),
    name: Option<(Register, String)>,
}

/// Decodes the pipeline-creating calls of an x86-64 ELF file (`elf`, parsed from `file`) that imports the Vulkan
/// loader (ggml takes its entry points with `vkGetInstanceProcAddr`/`vkGetDeviceProcAddr`); None when it is no
/// such file.
///
/// Within `budget`: each byte of code decoded once ([`each_instruction`]), every read charged, at most
/// [`MAX_SITES`] call sites kept and as many addresses looked at for SPIR-V or a name; past a bound the walk
/// stops, what it found stands and [`Created::cut`] says why.
pub(crate) fn decode<'d, R: ReadRef<'d>>(
    file: &CodeFile,
    elf: &object::File<'d, R>,
    budget: &mut Budget,
) -> Option<Created> {
    if elf.architecture() != object::Architecture::X86_64
        || !elf.dynamic_symbols().any(|s| s.is_undefined() && s.name().is_ok_and(|n| n.starts_with("vkGet")))
    {
        return None;
    }
    let mut segments = crate::os::elf::segments(elf);
    segments.truncate(MAX_SEGMENTS);
    let relocated = got_values(elf, budget);
    let strings = string_sections(elf);
    let mut spirv_at: HashMap<u64, bool> = HashMap::new();
    let mut names_at: HashMap<u64, Option<String>> = HashMap::new();
    let mut sites = Vec::new();
    let mut info = InstructionInfoFactory::new();
    let mut known: HashMap<Register, Value> = HashMap::new();
    each_instruction(file, elf, budget, |insn, new_section, budget| {
        if new_section {
            known.clear();
        }
        if insn.mnemonic() == Mnemonic::Call && insn.op0_kind() == OpKind::NearBranch64 && sites.len() < MAX_SITES {
            let mut arrays = ARGS.iter().filter_map(|&r| {
                let v = *known.get(&r)?;
                let first = match v {
                    Value::Addr(a) => a,
                    Value::Table(t) => *relocated.get(&t)?,
                };
                cached(&mut spirv_at, first, budget, |b| is_spirv(file, &segments, first, b)).then_some((r, v))
            });
            if let (Some(array), None) = (arrays.next(), arrays.next()) {
                let mut names = ARGS.iter().filter_map(|&r| match known.get(&r) {
                    Some(&Value::Addr(a)) => cached(&mut names_at, a, budget, |b| {
                        c_string(&strings, file, a, b).filter(|s| is_pipeline_name(s))
                    })
                    .map(|n| (r, n)),
                    _ => None,
                });
                let name = match (names.next(), names.next()) {
                    (Some(one), None) => Some(one),
                    _ => None,
                };
                sites.push(Site { target: insn.near_branch_target(), array, name });
            }
        }
        track(insn, &mut info, &relocated, &mut known);
    });
    if sites.len() >= MAX_SITES || spirv_at.len() >= MAX_SITES || names_at.len() >= MAX_SITES {
        budget.stop(reading::CUT_SITES);
    }
    let out = created(&sites, &relocated, |a| {
        spirv_at.get(&a).copied().unwrap_or_else(|| is_spirv(file, &segments, a, budget))
    });
    Some(Created { cut: budget.cut, ..out })
}

/// What `look` says of `key`, from `cache` or looked up and kept while the cache holds fewer than
/// [`MAX_SITES`] (past it, looked up each time: the budget bounds the reads).
fn cached<V: Clone>(
    cache: &mut HashMap<u64, V>,
    key: u64,
    budget: &mut Budget,
    look: impl FnOnce(&mut Budget) -> V,
) -> V {
    if let Some(v) = cache.get(&key) {
        return v.clone();
    }
    let v = look(budget);
    if cache.len() < MAX_SITES {
        cache.insert(key, v.clone());
    }
    v
}

/// Whether the file holds SPIR-V's magic at `addr` (in one of its loadable `segments`), the read charged.
#[expect(clippy::little_endian_bytes, reason = "SPIR-V's magic is read as an x86-64 file stores it")]
fn is_spirv(file: &CodeFile, segments: &[(u64, u64, u64)], addr: u64, budget: &mut Budget) -> bool {
    let mut word = [0u8; 4];
    addr.is_multiple_of(4)
        && segments.iter().any(|&(off, filesz, seg)| {
            addr.checked_sub(seg).is_some_and(|rel| {
                rel.checked_add(4).is_some_and(|end| end <= filesz)
                    && budget.take(4)
                    && off.checked_add(rel).is_some_and(|at| file.read_exact_at(at, &mut word).is_ok())
                    && u32::from_le_bytes(word) == SPIRV_MAGIC
            })
        })
}

/// The arrays the creating functions' calls among `sites` name.
fn created(sites: &[Site], relocated: &HashMap<u64, u64>, mut is_spirv: impl FnMut(u64) -> bool) -> Created {
    let mut out = Created::default();
    for (target, (name_reg, array_reg)) in creating_functions(sites) {
        for site in sites.iter().filter(|s| s.target == target && s.array.0 == array_reg) {
            out.calls += 1;
            let Some((_, name)) = site.name.as_ref().filter(|(r, _)| *r == name_reg) else {
                out.unnamed_calls += 1;
                continue;
            };
            for array in arrays_of(site.array.1, relocated, &mut is_spirv) {
                out.by_array.entry(array).or_default().insert(name.clone());
            }
        }
    }
    out
}

/// The call targets that create pipelines, each with its name's and array's registers: those whose calls
/// pass a name and an array in the same two registers at least [`MIN_SITES`] times.
fn creating_functions(sites: &[Site]) -> Vec<(u64, (Register, Register))> {
    let mut patterns: HashMap<(u64, Register, Register), usize> = HashMap::new();
    for s in sites {
        if let Some((name_reg, _)) = &s.name {
            *patterns.entry((s.target, *name_reg, s.array.0)).or_default() += 1;
        }
    }
    // One pattern per target: its most frequent (ties to the lower registers, for a stable answer).
    let mut best: BTreeMap<u64, ((Register, Register), usize)> = BTreeMap::new();
    for ((target, n, a), count) in patterns {
        let e = best.entry(target).or_insert(((n, a), 0));
        if count > e.1 || (count == e.1 && (n, a) < e.0) {
            *e = ((n, a), count);
        }
    }
    best.into_iter().filter(|(_, (_, count))| *count >= MIN_SITES).map(|(t, (regs, _))| (t, regs)).collect()
}

/// The arrays a value stands for: the address itself, or a table's entries up to the first that is no
/// relocated SPIR-V address (at most [`MAX_TABLE`]).
fn arrays_of(value: Value, relocated: &HashMap<u64, u64>, mut is_spirv: impl FnMut(u64) -> bool) -> Vec<u64> {
    match value {
        Value::Addr(a) => vec![a],
        Value::Table(t) => (0..MAX_TABLE)
            .map_while(|i| relocated.get(&t.checked_add(8 * i)?).copied().filter(|&a| is_spirv(a)))
            .collect(),
    }
}

/// Whether a string could be a ggml pipeline name: an identifier of lower-case letters, digits and `_`,
/// 2 to 128 bytes (`"main"`, the entry point, is passed as well and is never a pipeline's name).
fn is_pipeline_name(s: &str) -> bool {
    (2..=128).contains(&s.len())
        && s != "main"
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
}

/// Follows what straight-line code loads into registers ([`follow`]): `lea r, [rip+x]`, `mov r, [rip+slot]` of
/// a relocated slot, register copies, and `mov r, [base+index*8]` from a known base (a table).
fn track(
    insn: &Instruction,
    info: &mut InstructionInfoFactory,
    relocated: &HashMap<u64, u64>,
    known: &mut HashMap<Register, Value>,
) {
    follow(insn, info, known, |known| match insn.mnemonic() {
        Mnemonic::Lea if insn.is_ip_rel_memory_operand() => Some(Value::Addr(insn.ip_rel_memory_address())),
        Mnemonic::Mov if insn.op0_register().size() == 8 => match insn.op1_kind() {
            OpKind::Register => known.get(&insn.op1_register().full_register()).copied(),
            OpKind::Memory if insn.is_ip_rel_memory_operand() => {
                relocated.get(&insn.ip_rel_memory_address()).map(|&a| Value::Addr(a))
            }
            OpKind::Memory if insn.memory_index_scale() == 8 && insn.memory_index() != Register::None => {
                match known.get(&insn.memory_base().full_register()) {
                    Some(&Value::Addr(base)) => Some(Value::Table(base.wrapping_add(insn.memory_displacement64()))),
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(target: u64, name: Option<(Register, &str)>, array: Register) -> Site {
        Site { target, array: (array, Value::Addr(0x1000)), name: name.map(|(r, n)| (r, n.to_owned())) }
    }

    #[test]
    fn a_creating_function_is_one_called_often_with_a_name_and_an_array_in_the_same_registers() {
        let mut sites: Vec<Site> =
            std::iter::repeat_with(|| site(0x7d430, Some((Register::RCX, "rms_norm_f32")), Register::R9))
                .take(MIN_SITES)
                .collect();
        // Another shape at the same target is not its pattern; a target called less often is none.
        sites.push(site(0x7d430, Some((Register::RDX, "x")), Register::R8));
        sites.extend(
            std::iter::repeat_with(|| site(0x921b0, Some((Register::RCX, "matmul_f16")), Register::R9))
                .take(MIN_SITES - 1),
        );
        sites.extend(std::iter::repeat_with(|| site(0x8efa0, None, Register::R9)).take(40));
        assert_eq!(creating_functions(&sites), vec![(0x7d430, (Register::RCX, Register::R9))]);
    }

    #[test]
    fn a_table_stands_for_its_entries_up_to_the_first_that_is_no_array() {
        let relocated: HashMap<u64, u64> = [(0x100, 0x4000), (0x108, 0x8000), (0x110, 0x9000), (0x118, 0x5)].into();
        let spirv = |a: u64| a >= 0x4000;
        assert_eq!(arrays_of(Value::Table(0x100), &relocated, spirv), vec![0x4000, 0x8000, 0x9000]);
        assert_eq!(arrays_of(Value::Table(0x108), &relocated, |a| a == 0x8000), vec![0x8000]);
        assert_eq!(arrays_of(Value::Table(0x200), &relocated, spirv), Vec::<u64>::new());
        assert_eq!(arrays_of(Value::Addr(0x4000), &relocated, spirv), vec![0x4000]);
    }

    #[test]
    fn pipeline_names_are_lower_case_identifiers_other_than_the_entry_point() {
        assert!(is_pipeline_name("mul_mat_vec_q4_k_f32_f32"));
        assert!(is_pipeline_name("fa_split_k_reduce"));
        for not in ["main", "x", "Compute pipeline", "_Z3foo", "ggml_vulkan: %s", "9abc", &"a".repeat(129)] {
            assert!(!is_pipeline_name(not), "{not}");
        }
    }
}
