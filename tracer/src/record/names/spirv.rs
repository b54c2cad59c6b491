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

use std::{collections::HashMap, sync::Arc};

use tracer_common::{CODE_CHUNKS, NAME_MAX};

use super::{Of, Source};
use crate::{os::files::CodeFile, trace};

/// SPIR-V's magic number, the first word of every module (little-endian in the file).
const SPIRV_MAGIC: u32 = 0x0723_0203;
/// The most bytes a runtime is taken to insert in a module's head (ggml inserts at most 19 words).
pub(super) const MAX_INSERTED: u64 = 1024;
/// Arrays indexed per file at most (ggml 0.3.36 has a few thousand); more are counted.
const MAX_SHADERS: usize = 16_384;
/// Shader modules remembered per process at most (a process that makes more is counted).
const MAX_MODULES: usize = 1 << 16;
/// Bytes of an array's head read to find where its preamble ends, at most.
const HEAD_MAX: u64 = 16 << 10;
/// Bytes of a module's end the probe reads, at most.
const WINDOW: usize = CODE_CHUNKS as usize * NAME_MAX;

/// One embedded shader: its array's name without `_data`, its size in bytes, and its end after its
/// preamble (at most [`WINDOW`] bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shader {
    pub(super) name: String,
    pub(super) size: u64,
    pub(super) body_end: Box<[u8]>,
}

/// A file's SPIR-V arrays by their last [`NAME_MAX`] bytes.
#[derive(Debug, Default)]
pub struct ShaderIndex {
    pub(super) by_tail: HashMap<Box<[u8]>, Vec<Shader>>,
    /// Arrays left out: past [`MAX_SHADERS`], or whose bytes could not be read.
    pub(super) left_out: u64,
}

/// Where a SPIR-V module's preamble ends (bytes).
///
/// Past its header and its leading capabilities, extensions, instruction-set imports, memory model, entry
/// points and execution modes. None when the words are not SPIR-V.
pub fn preamble_end(words: &[u8]) -> Option<usize> {
    let word = |i: usize| words.get(4 * i..4 * i + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
    if word(0)? != SPIRV_MAGIC {
        return None;
    }
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

impl ShaderIndex {
    /// The arrays of an ELF file: data symbols named `*_data` whose bytes are SPIR-V.
    pub fn parse(file: &CodeFile) -> Option<Self> {
        let (symbols, segments) = {
            let view = file.elf();
            let elf = crate::os::elf::parse(&view)?;
            (crate::os::elf::data_symbols(&elf, "_data", NAME_MAX as u64), crate::os::elf::segments(&elf))
        };
        let offset_of = |vaddr: u64, len: u64| {
            segments.iter().find_map(|&(off, filesz, seg)| {
                let rel = vaddr.checked_sub(seg)?;
                (rel.checked_add(len)? <= filesz).then(|| off + rel)
            })
        };
        let mut index = Self::default();
        let mut indexed = 0usize;
        for (name, addr, size) in symbols {
            if indexed >= MAX_SHADERS {
                index.left_out += 1;
                continue;
            }
            let head_len = size.min(HEAD_MAX);
            let Some(head) =
                offset_of(addr, head_len).and_then(|at| file.read_vec(at, head_len, HEAD_MAX, "shader").ok())
            else {
                index.left_out += 1;
                continue;
            };
            let Some(body) = preamble_end(&head) else { continue }; // a `_data` array that is no shader
            let keep = (size.saturating_sub(body as u64)).min(WINDOW as u64).max(NAME_MAX as u64).min(size);
            let Some(end) = offset_of(addr + size - keep, keep)
                .and_then(|at| file.read_vec(at, keep, WINDOW as u64, "shader").ok())
            else {
                index.left_out += 1;
                continue;
            };
            indexed += 1;
            let tail: Box<[u8]> = end[end.len() - NAME_MAX..].into();
            let name = name.strip_suffix("_data").unwrap_or(&name).to_owned();
            index.by_tail.entry(tail).or_default().push(Shader { name, size, body_end: end.into_boxed_slice() });
        }
        Some(index)
    }

    /// The shader a module of `size` bytes whose code ends with `end` (at least [`NAME_MAX`] bytes) was
    /// made from; Err with how many arrays matched otherwise (0: none).
    pub fn find(&self, size: u64, end: &[u8]) -> Result<&Shader, usize> {
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

/// What a process's shader module was named: the shader and the file holding it, or unnamed.
#[derive(Clone, Debug)]
pub(super) struct ModuleShader {
    name: Option<(String, String)>,
}

impl Of<'_> {
    /// A shader module made from `size` bytes of code ending with `end`: named from the ggml files the
    /// process maps (counted when it cannot be).
    pub(crate) fn shader_module(&mut self, module: u64, size: u64, end: &[u8], ts: u64) {
        let name = if end.len() >= NAME_MAX { self.shader_named(size, end, ts) } else { None };
        if end.len() < NAME_MAX {
            self.names.count("shader_modules_unread");
        }
        if self.proc.shader_modules.len() >= MAX_MODULES && !self.proc.shader_modules.contains_key(&module) {
            self.names.count("shader_modules_over_limit");
            return;
        }
        self.proc.shader_modules.insert(module, ModuleShader { name });
    }

    /// The name and file of the shader ending with `tail`, from the first ggml file mapped that has it.
    fn shader_named(&mut self, size: u64, tail: &[u8], ts: u64) -> Option<(String, String)> {
        let mappings = self.ggml_mappings(ts);
        let mut ambiguous = false;
        for mapping in mappings {
            let index = if let Some(index) = self.names.shaders.get(&mapping.file) {
                index.clone()
            } else {
                let parsed = self.file(&mapping).and_then(|f| ShaderIndex::parse(&f)).map(Arc::new);
                if let Some(index) = &parsed
                    && index.left_out > 0
                {
                    *self.names.counts.entry("shader_arrays_left_out").or_default() += index.left_out;
                }
                self.names.shaders.insert(mapping.file, parsed.clone());
                parsed
            };
            match index.as_deref().map(|i| i.find(size, tail)) {
                Some(Ok(shader)) => return Some((shader.name.clone(), mapping.path)),
                Some(Err(n)) if n > 1 => ambiguous = true,
                _ => {}
            }
        }
        self.names.count(if ambiguous { "shader_modules_ambiguous" } else { "shader_modules_unmatched" });
        None
    }

    /// The process's mappings of ggml files, one per file.
    fn ggml_mappings(&mut self, ts: u64) -> Vec<super::maps::Mapping> {
        if self.proc.maps.as_ref().is_none_or(|s| s.taken < ts) && !self.proc.gone {
            self.snapshot();
        }
        let mut seen = std::collections::HashSet::new();
        self.proc
            .maps
            .iter()
            .flat_map(|s| s.maps.iter())
            .filter(|m| m.path.rsplit('/').next().is_some_and(|n| n.contains("ggml")) && seen.insert(m.file))
            .cloned()
            .collect()
    }

    /// A compute pipeline made from a shader module: bound to the module's shader name. None when the
    /// module was not seen made (its launches are then unnamed, and counted as such).
    pub(crate) fn pipeline(&mut self, pipeline: u64, module: u64, ts: u64) -> Option<trace::Kernel> {
        let shader = self.proc.shader_modules.get(&module)?.clone();
        let Some((name, file)) = shader.name else {
            self.names.unnamed += 1;
            return self.bind(pipeline, module, "", Source::Unnamed, false, ts);
        };
        let mut rec = self.bind(pipeline, module, &name, Source::Shader, false, ts)?;
        rec.code_file = Some(file);
        Some(rec)
    }
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
