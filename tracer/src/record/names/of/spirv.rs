//! Vulkan shader modules and compute pipelines named for one process: by the name its runtime gave, else by
//! the ggml file's array the module was made from (the file's index, [`crate::record::names::spirv`]), else by
//! the module's own entry points.

use crate::trace::counted::Counted;

use tracer_common::NAME_MAX;

use crate::{
    record::names::{
        Names, Of,
        maps::{FileId, Mapping},
        spirv::{ModuleShader, ShaderIndex, entry_points, self_name},
    },
    trace::{self, Source},
};

/// Shader modules remembered per process at most (a process that makes more is counted).
const MAX_MODULES: usize = 1 << 16;

impl Of<'_> {
    /// A shader module made from `size` bytes of code beginning with `head` and ending with `end`: under
    /// the name `given` by its runtime (ggml-vulkan's for the pipeline being made, with the address of the
    /// SPIR-V it was given: its file's), else named from the ggml files the process maps, else by its own
    /// entry points (counted when it cannot be).
    pub(crate) fn shader_module(
        &mut self,
        module: u64,
        size: u64,
        (head, end): (Option<&[u8]>, &[u8]),
        given: Option<(String, u64)>,
        ts: u64,
    ) {
        let given_too = given.is_some();
        let mut name = match given {
            // Its file is the one mapped where its SPIR-V lies.
            Some((given, spirv)) => {
                self.names.count(Counted::ShaderModulesNamedByRuntime);
                Some((given, self.mapping_at(spirv, ts).map(|m| m.path.clone())))
            }
            None if end.len() >= NAME_MAX => self.shader_named(size, end, ts).map(|(n, f)| (n, Some(f))),
            None => None,
        };
        if end.len() < NAME_MAX && !given_too {
            self.names.count(Counted::ShaderModulesUnread);
        }
        if name.is_none()
            && end.len() >= NAME_MAX
            && let Some(head) = head
            && let Some(entries) = entry_points(head)
        {
            name = Some((self_name(&entries, size, head, end), None));
            self.names.count(Counted::ShaderModulesSelfNamed);
        }
        if self.proc.shader_modules.len() >= MAX_MODULES && !self.proc.shader_modules.contains_key(&module) {
            self.names.count(Counted::ShaderModulesOverLimit);
            return;
        }
        self.proc.shader_modules.insert(module, ModuleShader { name, given: given_too });
    }

    /// The name and file of the shader ending with `tail`, from the first ggml file mapped that has it.
    fn shader_named(&mut self, size: u64, tail: &[u8], ts: u64) -> Option<(String, String)> {
        let mappings = self.ggml_mappings(ts);
        let (mut ambiguous, mut late) = (false, false);
        for mapping in mappings {
            // Read on the finders' thread; not ready in the time the session waits: this module is named
            // as one no index matches, later ones by the index.
            let Ok(index) = self.shader_index(&mapping) else {
                late = true;
                continue;
            };
            match index.as_deref().map(|i| i.find(size, tail)) {
                Some(Ok(shader)) => return Some((shader.name.clone(), mapping.path)),
                Some(Err(n)) if n > 1 => ambiguous = true,
                _ => {}
            }
        }
        self.names.count(match (ambiguous, late) {
            (true, _) => Counted::ShaderModulesAmbiguous,
            (false, true) => Counted::ShaderIndexLate,
            (false, false) => Counted::ShaderModulesUnmatched,
        });
        None
    }
}

impl Names {
    /// The counters of a ggml file's index, once it is read, and the sentence saying it was not read in full.
    pub(in crate::record::names) fn index_read(&mut self, file: FileId, path: &str, index: &ShaderIndex) {
        let mut add = |key, n| {
            if n > 0 {
                self.counts.add(key, n);
            }
        };
        add(Counted::ShaderArraysLeftOut, index.left_out);
        if let Some((named, unnamed_calls)) = index.from_code {
            add(Counted::ShaderArraysNamedFromCode, named);
            add(Counted::ShaderPipelinesNamedAtRunTime, unnamed_calls);
        }
        if let Some(why) = index.cut {
            self.count(Counted::CodeFilesUnread);
            self.warn(
                file,
                format!(
                    "{path}: ggml-vulkan's pipeline finder stopped {why}: the shaders it did not reach are named by \
                     their own entry points"
                ),
            );
        }
    }
}

impl Of<'_> {
    /// The process's mappings of ggml files, one per file.
    fn ggml_mappings(&mut self, ts: u64) -> Vec<Mapping> {
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
        let source = match (shader.given, &file) {
            (true, _) => Source::Pipeline,
            (false, Some(_)) => Source::Shader,
            (false, None) => Source::Spirv,
        };
        let mut rec = self.bind(pipeline, module, &name, source, false, ts)?;
        rec.code_file = file;
        Some(rec)
    }
}
