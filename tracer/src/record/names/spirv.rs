//! Vulkan compute pipelines named by the SPIR-V their shader module was made from.
//!
//! ggml's Vulkan backend embeds every shader in `libggml-vulkan.so` as a named array
//! (`matmul_q4_k_f32_data`, its size in `matmul_q4_k_f32_len`) and hands those words to
//! `vkCreateShaderModule`, or a copy whose head it patched: float-control execution modes, a capability
//! and an extension inserted among the module's first instructions (its capabilities, extensions, memory
//! model, entry points and execution modes: the *preamble*). Everything after the preamble is the same
//! in the copy, at the same distance from the end. The probe reads up to [`CODE_CHUNKS`] ×
//! [`NAME_MAX`] bytes of a module's end; each array is indexed by its last [`NAME_MAX`] bytes, and is
//! that module's shader when the module is no shorter and at most [`MAX_INSERTED`] bytes longer, and
//! the module's end equals the array's after its preamble as far as both were read. Several arrays
//! matching, none of the module's size, leave it unnamed and counted, never guessed.
//!
//! Only files whose name says they are ggml's (`*ggml*`) are indexed: the arrays of one file are read
//! once, for every process that maps it, and an index holds at most [`MAX_SHADERS`] arrays.
//!
//! A process's modules and pipelines named from them: `of/spirv.rs`.

use std::collections::HashMap;

use tracer_common::{CODE_CHUNKS, NAME_MAX};

use super::reading::Budget;
use crate::os::files::CodeFile;

/// SPIR-V's magic number, the first word of every module (little-endian in the file).
const SPIRV_MAGIC: u32 = 0x0723_0203;
/// The most bytes a runtime is taken to insert in a module's head (ggml inserts at most 19 words).
pub(super) const MAX_INSERTED: u64 = 1024;
/// Arrays indexed per file at most (ggml 0.3.36 has a few thousand); more are counted.
const MAX_SHADERS: usize = 16_384;
/// Bytes of an array's head read to find where its preamble ends, at most.
const HEAD_MAX: u64 = 16 << 10;
/// Bytes of a module's end the probe reads, at most.
const WINDOW: usize = CODE_CHUNKS as usize * NAME_MAX;

/// One embedded shader: its array's name without `_data`, its size in bytes, and its end after its
/// preamble (at most [`WINDOW`] bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shader {
    pub(super) name: String,
    pub(super) size: u64,
    pub(super) body_end: Box<[u8]>,
}

/// A file's SPIR-V arrays by their last [`NAME_MAX`] bytes.
#[derive(Debug, Default)]
pub(crate) struct ShaderIndex {
    pub(super) by_tail: HashMap<Box<[u8]>, Vec<Shader>>,
    /// Arrays left out: past [`MAX_SHADERS`], or whose bytes could not be read.
    pub(super) left_out: u64,
    /// Where the arrays were named from the file's code: how many, and the creating calls whose name
    /// is built at run time.
    pub(super) from_code: Option<(u64, u64)>,
    /// Why the file was not read in full (its finder's budget, [`super::reading`]); None: it was.
    pub(crate) cut: Option<&'static str>,
}

/// Word `i` of a SPIR-V module's `bytes` (None past their end), when they begin with SPIR-V's magic.
fn spirv_words(bytes: &[u8]) -> Option<impl Fn(usize) -> Option<u32>> {
    let word = |i: usize| bytes.get(4 * i..4 * i + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
    (word(0)? == SPIRV_MAGIC).then_some(word)
}

/// Where a SPIR-V module's preamble ends (bytes).
///
/// Past its header and its leading capabilities, extensions, instruction-set imports, memory model, entry
/// points and execution modes. None when the words are not SPIR-V.
pub(crate) fn preamble_end(words: &[u8]) -> Option<usize> {
    let word = spirv_words(words)?;
    let mut at = 5usize;
    while let Some(w) = word(at) {
        let (len, opcode) = ((w >> 16) as usize, w & 0xffff);
        // OpExtension 10, OpExtInstImport 11, OpMemoryModel 14, OpEntryPoint 15, OpExecutionMode 16,
        // OpCapability 17, OpExecutionModeId 331.
        if len == 0 || !matches!(opcode, 10 | 11 | 14 | 15 | 16 | 17 | 331) {
            break;
        }
        at += len;
    }
    Some(4 * at)
}

/// The most bytes a SPIR-V array found through the code is walked to find its end.
const MODULE_MAX: u64 = 8 << 20;

/// `OpFunctionEnd`'s opcode: a module's last instruction (its functions come last).
const OP_FUNCTION_END: u32 = 56;

/// The length of the SPIR-V module at file offset `at`, whose size no symbol gives: its instructions walked
/// from the header (each word count read) until a word that begins no instruction (0, or the next
/// module's magic) or the file's end; it ends with the last `OpFunctionEnd` met. None when none is met
/// within [`MODULE_MAX`] bytes. Each chunk read is charged to `budget`.
fn module_len(file: &CodeFile, at: u64, budget: &mut Budget) -> Option<u64> {
    const CHUNK: u64 = 64 << 10;
    let mut buf = vec![0u8; CHUNK as usize];
    if !budget.take(CHUNK) {
        return None;
    }
    let (mut chunk_at, mut chunk_len) = (at, file.read_at_most(at, &mut buf).ok()? as u64);
    let mut word_at = |pos: u64| -> Option<u32> {
        let abs = at.checked_add(pos)?;
        if abs < chunk_at || abs.checked_add(4)? > chunk_at + chunk_len {
            if !budget.take(CHUNK) {
                return None;
            }
            chunk_at = abs;
            chunk_len = file.read_at_most(abs, &mut buf).ok()? as u64;
            if chunk_len < 4 {
                return None;
            }
        }
        let i = (abs - chunk_at) as usize;
        buf.get(i..i + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes)
    };
    if word_at(0)? != SPIRV_MAGIC {
        return None;
    }
    let (mut pos, mut end) = (20u64, None);
    while pos < MODULE_MAX {
        let Some(word) = word_at(pos) else { break };
        let count = u64::from(word >> 16);
        if word == SPIRV_MAGIC || count == 0 {
            break;
        }
        pos += 4 * count;
        if word & 0xffff == OP_FUNCTION_END {
            end = Some(pos);
        }
    }
    end
}

impl ShaderIndex {
    /// The arrays of an ELF file: data symbols named `*_data` whose bytes are SPIR-V, or, in a file that
    /// keeps none (a stripped `libggml-vulkan.so`), the arrays its code creates pipelines from, each named
    /// by the pipeline names it is passed with ([`super::pipelines`]; several joined by `|`). Within a
    /// file's budget, drawn from the recording's.
    pub(crate) fn parse(file: &CodeFile) -> Option<Self> {
        Self::parse_within(file, &mut Budget::file())
    }

    /// The same within `budget` (the code decoded, the modules walked, the arrays read): past it, the arrays
    /// found so far are indexed and [`Self::cut`] says why.
    pub(crate) fn parse_within(file: &CodeFile, budget: &mut Budget) -> Option<Self> {
        let view = file.elf();
        let elf = crate::os::elf::parse(&view)?;
        let (symbols, segments) =
            (crate::os::elf::data_symbols(&elf, "_data", NAME_MAX as u64), crate::os::elf::segments(&elf));
        let offset_of = |vaddr: u64, len: u64| {
            segments.iter().find_map(|&(off, filesz, seg)| {
                let rel = vaddr.checked_sub(seg)?;
                (rel.checked_add(len)? <= filesz).then(|| off + rel)
            })
        };
        let mut index = Self::default();
        let mut arrays: Vec<(String, u64, Option<u64>)> = symbols
            .into_iter()
            .map(|(name, addr, size)| (name.strip_suffix("_data").unwrap_or(&name).to_owned(), addr, Some(size)))
            .collect();
        if arrays.is_empty()
            && let Some(created) = super::pipelines::decode(file, &elf, budget)
        {
            index.from_code = Some((created.by_array.len() as u64, created.unnamed_calls as u64));
            arrays = created
                .by_array
                .into_iter()
                .map(|(addr, names)| (names.into_iter().collect::<Vec<_>>().join("|"), addr, None))
                .collect();
        }
        let mut indexed = 0usize;
        for (name, addr, size) in arrays {
            if indexed >= MAX_SHADERS {
                index.left_out += 1;
                continue;
            }
            let Some(size) = size.or_else(|| module_len(file, offset_of(addr, 0)?, budget)) else {
                index.left_out += 1;
                continue;
            };
            let head_len = size.min(HEAD_MAX);
            let Some(head) = offset_of(addr, head_len)
                .filter(|_| budget.take(head_len))
                .and_then(|at| file.read_vec(at, head_len, HEAD_MAX, "shader").ok())
            else {
                index.left_out += 1;
                continue;
            };
            let Some(body) = preamble_end(&head) else { continue }; // a `_data` array that is no shader
            let keep = (size.saturating_sub(body as u64)).min(WINDOW as u64).max(NAME_MAX as u64).min(size);
            let Some(end) = offset_of(addr.saturating_add(size - keep), keep)
                .filter(|_| budget.take(keep))
                .and_then(|at| file.read_vec(at, keep, WINDOW as u64, "shader").ok())
            else {
                index.left_out += 1;
                continue;
            };
            if end.len() < NAME_MAX {
                index.left_out += 1;
                continue;
            }
            indexed += 1;
            let tail: Box<[u8]> = end[end.len() - NAME_MAX..].into();
            index.by_tail.entry(tail).or_default().push(Shader { name, size, body_end: end.into_boxed_slice() });
        }
        index.cut = budget.cut;
        Some(index)
    }

    /// Its shaders' names and sizes, by name (what `tracer inspect` lists), and whether the names came from
    /// the file's code (a copy without symbols) rather than its `*_data` symbols.
    pub(crate) fn listing(&self) -> (Vec<(&str, u64)>, bool) {
        let mut all: Vec<(&str, u64)> = self.by_tail.values().flatten().map(|s| (s.name.as_str(), s.size)).collect();
        all.sort_unstable();
        all.dedup();
        (all, self.from_code.is_some())
    }

    /// Arrays left out of the index (past its cap, or unreadable).
    pub(crate) const fn left_out(&self) -> u64 {
        self.left_out
    }

    /// The shader a module of `size` bytes whose code ends with `end` (at least [`NAME_MAX`] bytes) was
    /// made from; Err with how many arrays matched otherwise (0: none).
    pub(crate) fn find(&self, size: u64, end: &[u8]) -> Result<&Shader, usize> {
        let Some(tail) = end.len().checked_sub(NAME_MAX).map(|at| &end[at..]) else { return Err(0) };
        let same_end = |s: &Shader| {
            let n = s.body_end.len().min(end.len());
            s.body_end[s.body_end.len() - n..] == end[end.len() - n..]
        };
        let fits: Vec<&Shader> = self
            .by_tail
            .get(tail)
            .map(|all| all.iter().filter(|s| size >= s.size && size - s.size <= MAX_INSERTED && same_end(s)).collect())
            .unwrap_or_default();
        match fits.as_slice() {
            [one] => Ok(one),
            [] => Err(0),
            many => {
                let exact: Vec<&&Shader> = many.iter().filter(|s| s.size == size).collect();
                match exact.as_slice() {
                    [one] => Ok(one),
                    _ => Err(many.len()),
                }
            }
        }
    }
}

/// What a process's shader module was named: the shader and the file holding it (a ggml array), the
/// module's own entry points (no file), or unnamed.
#[derive(Clone, Debug)]
pub(super) struct ModuleShader {
    pub(super) name: Option<(String, Option<String>)>,
    /// The name is the one its runtime gave the pipeline (ggml-vulkan's `pipeline->name`).
    pub(super) given: bool,
}

/// `OpEntryPoint`'s opcode.
const OP_ENTRY_POINT: u32 = 15;
/// Entry points a module's name lists at most.
const MAX_ENTRY_POINTS: usize = 4;

/// The entry points a SPIR-V module's first bytes declare, in order (each `OpEntryPoint`'s name), as far
/// as `head` holds them. None when `head` is not SPIR-V or declares none in full.
pub(crate) fn entry_points(head: &[u8]) -> Option<Vec<String>> {
    let word = spirv_words(head)?;
    let (mut at, mut names) = (5usize, Vec::new());
    while let Some(first) = word(at) {
        let (count, opcode) = ((first >> 16) as usize, first & 0xffff);
        if count == 0 || at.checked_add(count).is_none_or(|end| end > head.len() / 4) {
            break; // cut by the head's end, or not an instruction
        }
        if opcode == OP_ENTRY_POINT && count > 3 {
            // Execution model, function id, then the name: a NUL-terminated string padded to words.
            let bytes = head.get(4 * (at + 3)..4 * (at + count))?;
            let name = bytes.split(|&b| b == 0).next().unwrap_or_default();
            if names.len() < MAX_ENTRY_POINTS && !name.is_empty() {
                names.push(String::from_utf8_lossy(name).into_owned());
            }
        }
        at += count;
    }
    (!names.is_empty()).then_some(names)
}

/// A module's own name: its entry points and a short hash of its size and the bytes read of it
/// (`main@1c2f9a07`), the same for the same module in any process or recording.
#[expect(clippy::little_endian_bytes, reason = "the name is the same whichever host recorded it")]
pub(super) fn self_name(entries: &[String], size: u64, head: &[u8], end: &[u8]) -> String {
    let mut h = crc32fast::Hasher::new();
    h.update(&size.to_le_bytes());
    h.update(head);
    h.update(end);
    format!("{}@{:08x}", entries.join("+"), h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module of `size` bytes whose end (after a 100-byte preamble) is `fill` bytes, but for `mark` at
    /// `back` bytes from the end.
    fn end(size: u64, fill: u8, (back, mark): (usize, u8)) -> Vec<u8> {
        let n = (size as usize - 100).min(WINDOW);
        let mut v = vec![fill; n];
        v[n - back] = mark;
        v
    }

    fn index(shaders: &[(&str, u64, u8, (usize, u8))]) -> ShaderIndex {
        let mut index = ShaderIndex::default();
        for &(name, size, fill, mark) in shaders {
            let body_end = end(size, fill, mark).into_boxed_slice();
            let tail: Box<[u8]> = body_end[body_end.len() - NAME_MAX..].into();
            index.by_tail.entry(tail).or_default().push(Shader { name: name.into(), size, body_end });
        }
        index
    }

    /// A compute module's first words: header, `OpCapability Shader`, `OpMemoryModel`, then `OpEntryPoint
    /// GLCompute %4 "NAME"` for each name.
    #[expect(clippy::little_endian_bytes, reason = "SPIR-V's words are little-endian in memory here")]
    fn head_of(names: &[&str]) -> Vec<u8> {
        let mut words: Vec<u32> = vec![SPIRV_MAGIC, 0x0001_0300, 0, 20, 0, (2 << 16) | 0x11, 1, (3 << 16) | 0xe, 0, 1];
        for name in names {
            let mut bytes = name.as_bytes().to_vec();
            bytes.resize((bytes.len() / 4 + 1) * 4, 0);
            let count = 3 + bytes.len() / 4;
            words.extend([((count as u32) << 16) | OP_ENTRY_POINT, 5, 4]);
            words.extend(bytes.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())));
        }
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    #[expect(clippy::little_endian_bytes, reason = "SPIR-V's words are little-endian in memory here")]
    fn a_module_of_no_ggml_file_is_named_by_its_entry_points_and_a_stable_hash() {
        let head = head_of(&["main"]);
        assert_eq!(entry_points(&head), Some(vec!["main".to_owned()]));
        let two = head_of(&["reduce", "scan_pass"]);
        assert_eq!(entry_points(&two).unwrap(), ["reduce", "scan_pass"]);
        // Cut inside the second entry point: the first is declared in full, the second is not read.
        assert_eq!(entry_points(&two[..two.len() - 4]).unwrap(), ["reduce"]);
        // Not SPIR-V, no entry point, an instruction claiming more words than there are.
        assert_eq!(entry_points(b"\x7fELF and more bytes"), None);
        assert_eq!(entry_points(&head_of(&[])), None);
        let mut huge = head.clone();
        huge[40..44].copy_from_slice(&((0xffffu32 << 16) | OP_ENTRY_POINT).to_le_bytes());
        assert_eq!(entry_points(&huge), None);
        // The same module gives the same name; another size or other bytes another.
        let end = vec![7u8; NAME_MAX];
        let a = self_name(&["main".into()], 1224, &head, &end);
        assert_eq!(a, self_name(&["main".into()], 1224, &head, &end));
        assert!(a.starts_with("main@") && a.len() == "main@".len() + 8, "{a}");
        assert_ne!(a, self_name(&["main".into()], 1228, &head, &end));
        assert_ne!(a, self_name(&["main".into()], 1224, &head, &[8u8; NAME_MAX]));
    }

    #[test]
    fn a_module_is_the_array_ending_alike_even_with_words_inserted_in_its_head() {
        let i = index(&[("matmul_q4_k_f32", 40_000, 1, (1, 1)), ("add_f32", 3_000, 2, (1, 2))]);
        let module = end(40_000, 1, (1, 1));
        assert_eq!(i.find(40_000, &module).map(|s| s.name.as_str()), Ok("matmul_q4_k_f32"));
        // ggml's float-control patch: 19 words more, in the head.
        assert_eq!(i.find(40_076, &module).map(|s| s.name.as_str()), Ok("matmul_q4_k_f32"));
        // Shorter than the array, or far longer: not that shader.
        assert_eq!(i.find(39_996, &module), Err(0));
        assert_eq!(i.find(40_000 + MAX_INSERTED + 4, &module), Err(0));
        assert_eq!(i.find(3_000, &end(3_000, 9, (1, 9))), Err(0));
        assert_eq!(i.find(3_000, &module[..100]), Err(0));
    }

    #[test]
    fn arrays_ending_alike_are_told_apart_by_their_bodies_then_by_size() {
        // Alike in their last chunk, apart 1 000 bytes from the end (a constant).
        let i = index(&[("rms_norm_f32", 1_252, 3, (1_000, 7)), ("mul_mat_vec_q4_k_f32_f32", 1_252, 3, (1_000, 8))]);
        let module = end(1_252, 3, (1_000, 8));
        assert_eq!(i.find(1_252 + 28, &module).map(|s| s.name.as_str()), Ok("mul_mat_vec_q4_k_f32_f32"));
        // Alike as far as read: only the exact size tells, and a patched copy is left unnamed.
        let i = index(&[("rope_norm_f32", 5_000, 3, (1, 3)), ("rope_neox_f32", 5_040, 3, (1, 3))]);
        let module = end(5_040, 3, (1, 3));
        assert_eq!(i.find(5_040, &module).map(|s| s.name.as_str()), Ok("rope_neox_f32"));
        assert_eq!(i.find(5_000, &module).map(|s| s.name.as_str()), Ok("rope_norm_f32"));
        assert_eq!(i.find(5_076, &module), Err(2));
    }

    #[test]
    fn a_module_without_a_size_ends_at_its_last_function_end_before_the_next_module() {
        // Header, OpCapability, a function (OpFunction .. OpFunctionEnd), a second OpFunctionEnd, then the next
        // module's magic; or zeros; or the file's end.
        let mut words: Vec<u32> = vec![SPIRV_MAGIC, 0x0001_0300, 0, 20, 0, (2 << 16) | 0x11, 1];
        words.extend([(5 << 16) | 0x36, 1, 2, 0, 3, (1 << 16) | 0xfd, (1 << 16) | OP_FUNCTION_END]);
        words.extend([(1 << 16) | OP_FUNCTION_END]);
        let len = 4 * words.len() as u64;
        let dir = std::env::temp_dir().join(format!("tracer-spirv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (tail, expect) in [(vec![SPIRV_MAGIC, 7], Some(len)), (vec![0, 0], Some(len)), (vec![], Some(len))] {
            let path = dir.join("m.spv");
            let mut all = words.clone();
            all.extend(tail);
            std::fs::write(&path, all.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
            let file = CodeFile::user(&path).unwrap();
            assert_eq!(module_len(&file, 0, &mut Budget::alone(1 << 20)), expect);
            // Not SPIR-V at that offset; no function end at all.
            assert_eq!(module_len(&file, 4, &mut Budget::alone(1 << 20)), None);
        }
        let path = dir.join("nofn.spv");
        let head: Vec<u8> =
            [SPIRV_MAGIC, 0x0001_0300, 0, 20, 0, (2 << 16) | 0x11, 1].iter().flat_map(|w| w.to_le_bytes()).collect();
        std::fs::write(&path, head).unwrap();
        assert_eq!(module_len(&CodeFile::user(&path).unwrap(), 0, &mut Budget::alone(1 << 20)), None);
        // A budget smaller than a chunk reads nothing.
        assert_eq!(module_len(&CodeFile::user(&path).unwrap(), 0, &mut Budget::alone(100)), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_preamble_ends_at_the_first_instruction_past_modes() {
        let mut words: Vec<u32> = vec![SPIRV_MAGIC, 0x0001_0300, 0, 20, 0];
        words.extend([(2 << 16) | 0x11, 1]); // OpCapability Shader
        words.extend([(3 << 16) | 0x0e, 0, 1]); // OpMemoryModel
        words.extend([(3 << 16) | 0x10, 4, 17]); // OpExecutionMode
        words.extend([(2 << 16) | 0x05, 4]); // OpName: the body begins
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(preamble_end(&bytes), Some(4 * 13));
        assert_eq!(preamble_end(&bytes[4..]), None);
        // Cut short: ends where the words end.
        assert_eq!(preamble_end(&bytes[..4 * 7]), Some(4 * 7));
    }
}
