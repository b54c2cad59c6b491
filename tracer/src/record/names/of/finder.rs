//! The finders' side of one process's naming: a ggml file's shader index and a file's registration calls,
//! posted to the finders' thread the first time and waited for ([`crate::record::names::finder`]), and what
//! the recording takes in of their answers.

use crate::trace::counted::Counted;
use std::sync::{Arc, PoisonError};

use crate::record::names::{
    Names, Of,
    elf_symbols::{ElfSymbols, Registered},
    finder::Index,
    maps::{FileId, Mapping},
    spirv::ShaderIndex,
};

impl Of<'_> {
    /// A ggml file's shader index: read (posted to the finders' thread the first time), or Err when not
    /// ready in the time the session waits (counted by the caller).
    pub(in crate::record::names) fn shader_index(&mut self, mapping: &Mapping) -> Result<Index, ()> {
        if let Some(index) = self.names.shaders.get(&mapping.file) {
            return Ok(index.clone());
        }
        let pending = if let Some((p, _)) = self.names.finders.shaders.get(&mapping.file) {
            Arc::clone(p)
        } else {
            let Some(file) = self.file(mapping) else {
                self.names.shaders.insert(mapping.file, None);
                return Ok(None);
            };
            let Some(p) = self.names.finders.worker.post(move || ShaderIndex::parse(&file).map(Arc::new)) else {
                self.names.count(Counted::FinderQueueFull);
                return Err(());
            };
            self.names.finders.shaders.insert(mapping.file, (Arc::clone(&p), mapping.path.clone()));
            p
        };
        let index = self.names.finders.worker.wait(&pending).ok_or(())?;
        self.names.finders.shaders.remove(&mapping.file);
        if let Some(i) = &index {
            self.names.index_read(mapping.file, &mapping.path, i);
        }
        self.names.shaders.insert(mapping.file, index.clone());
        Ok(index)
    }

    /// The names a mapped file's registration calls give: read (posted to the finders' thread the first
    /// time), or None when not ready in the time the session waits (counted `registration_calls_late`) or
    /// the file is not open.
    pub(in crate::record::names) fn registered_in(&mut self, mapping: &Mapping) -> Option<Arc<Registered>> {
        if let Some(r) = self.names.finders.registered.get(&mapping.file) {
            return Some(Arc::clone(r));
        }
        let pending = if let Some(p) = self.names.finders.registrations.get(&mapping.file) {
            Arc::clone(p)
        } else {
            let file = self.file(mapping)?;
            let Some(p) = self.names.finders.worker.post(move || ElfSymbols::registered(&file)) else {
                self.names.count(Counted::FinderQueueFull);
                return None;
            };
            self.names.finders.registrations.insert(mapping.file, Arc::clone(&p));
            p
        };
        let Some(read) = self.names.finders.worker.wait(&pending) else {
            self.names.count(Counted::RegistrationCallsLate);
            return None;
        };
        self.names.finders.registrations.remove(&mapping.file);
        if let Some(why) = read.1 {
            self.names.count(Counted::CodeFilesUnread);
            let sentence = format!(
                "{}: the finder of its kernels' registration calls stopped {why}: kernels registered past there \
                 are named by their symbols or left unnamed",
                mapping.path
            );
            self.names.warn(mapping.file, sentence);
        }
        self.names.finders.registered.insert(mapping.file, Arc::clone(&read));
        Some(read)
    }
}

impl Names {
    /// The files the finders' thread was still reading when the recording stopped: counted
    /// (`code_files_unfinished`), one sentence each for the ggml files (a stop never waits for a finder).
    pub(crate) fn finders_unfinished(&mut self) -> Vec<String> {
        let n = self.finders.shaders.len() + self.finders.registrations.len();
        if n > 0 {
            self.counts.add(Counted::CodeFilesUnfinished, n as u64);
        }
        self.finders
            .shaders
            .values()
            .map(|(_, path)| {
                format!(
                    "{path}: the recording stopped while tracer's finder was still reading its code: the shader \
                     modules it had not named by then are named by their own SPIR-V"
                )
            })
            .collect()
    }

    /// The sentences for the user so far, after taking in every index the finders' thread has answered
    /// since (one no module waited for long enough: its counters and what it left unread are said too).
    pub(crate) fn take_warnings(&mut self) -> Vec<String> {
        let done: Vec<FileId> = self
            .finders
            .shaders
            .iter()
            .filter(|(_, (p, _))| p.slot.lock().unwrap_or_else(PoisonError::into_inner).is_some())
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            if let Some((p, path)) = self.finders.shaders.remove(&id) {
                let index = p.slot.lock().unwrap_or_else(PoisonError::into_inner).take().flatten();
                if let Some(i) = &index {
                    self.index_read(id, &path, i);
                }
                self.shaders.insert(id, index);
            }
        }
        std::mem::take(&mut self.warnings)
    }
}
