//! A fast path for the two hot record types, as this tracer's own writer spells them: read here, and
//! written here.
//!
//! A long recording is almost all `launch` and `call` lines, and parsing them with serde is what bounds
//! `tracer report` over hundreds of millions of events (each key is read as a string and matched by
//! name). The writer always emits the same keys in the same order with no spaces, so those lines are read
//! here by walking the expected keys. Anything else — another key order, whitespace, an escape, a number
//! out of range, a field this scanner does not know — returns `None`, and the reader parses the line with
//! serde as before: this is a shortcut for the canonical spelling, never a second definition of the
//! format. `tests` checks that both give the same record for every shape the writer produces.
//!
//! Writing them is half of what a recording costs its CPU at 60 000 launches/s, most of it in serde's
//! escaping of every key; [`spell_launch`] and [`spell_call`] write serde's very bytes without it, for the
//! records whose strings are all from tables tracer ships (function names, units, copy directions), and
//! leave the others (kernel parameters, a file's path) to serde. `tests` checks the bytes are serde's for
//! every shape.

use crate::trace::event::{ApiFunc, Call, GridUnit, Launch, MemcpyKind, Origin};

mod checks;
pub(super) use checks::{bad_strings_emptied, not_a_header, second_type_error, second_type_key};

/// A cursor over one line.
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    const fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// Consumes `text` exactly.
    fn lit(&mut self, text: &[u8]) -> Option<()> {
        let rest = self.bytes.get(self.at..)?;
        rest.starts_with(text).then(|| self.at += text.len())
    }

    /// Consumes `,"NAME":`.
    fn key(&mut self, name: &[u8]) -> Option<()> {
        self.lit(b",\"")?;
        self.lit(name)?;
        self.lit(b"\":")
    }

    /// An unsigned JSON integer (no sign, no leading zero, no fraction), within `u64`.
    fn u64(&mut self) -> Option<u64> {
        let start = self.at;
        let mut v: u64 = 0;
        while let Some(&b) = self.bytes.get(self.at)
            && b.is_ascii_digit()
        {
            v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            self.at += 1;
        }
        let digits = self.at - start;
        (digits == 1 || (digits > 1 && self.bytes[start] != b'0')).then_some(v)
    }

    fn u32(&mut self) -> Option<u32> {
        self.u64()?.try_into().ok()
    }

    fn i64(&mut self) -> Option<i64> {
        if self.lit(b"-").is_some() {
            let magnitude = self.u64()?;
            // -0 is valid JSON but not what the writer makes: leave it to serde.
            if magnitude == 0 {
                return None;
            }
            0i64.checked_sub_unsigned(magnitude)
        } else {
            self.u64()?.try_into().ok()
        }
    }

    fn u32x3(&mut self) -> Option<[u32; 3]> {
        let mut v = [0; 3];
        for (i, x) in v.iter_mut().enumerate() {
            self.lit(if i == 0 { b"[" } else { b"," })?;
            *x = self.u32()?;
        }
        self.lit(b"]")?;
        Some(v)
    }

    /// `"key":` and the value after it.
    fn keyed<T>(&mut self, key: &[u8], value: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        self.key(key)?;
        value(self)
    }

    /// A string with no escape in it.
    fn str(&mut self) -> Option<&'a str> {
        self.lit(b"\"")?;
        let rest = self.bytes.get(self.at..)?;
        let len = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at += len + 1;
        std::str::from_utf8(&rest[..len]).ok()
    }

    /// The common head of both record types: type, ts, pid, tid, lib, api.
    fn head(&mut self, type_name: &[u8]) -> Option<(u64, u32, u32, u32, ApiFunc)> {
        self.lit(b"{\"type\":\"")?;
        self.lit(type_name)?;
        self.lit(b"\"")?;
        let ts = self.keyed(b"ts", Self::u64)?;
        let pid = self.keyed(b"pid", Self::u32)?;
        let tid = self.keyed(b"tid", Self::u32)?;
        let lib = self.keyed(b"lib", Self::u32)?;
        self.key(b"api")?;
        let api = ApiFunc::from_name(self.str()?)?;
        Some((ts, pid, tid, lib, api))
    }

    /// Runs `step`; where it fails, the cursor is back where it was (a peek at what may come next).
    fn attempt<T>(&mut self, step: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        let at = self.at;
        let got = step(self);
        if got.is_none() {
            self.at = at;
        }
        got
    }

    /// Consumes `,"NAME":true` if it comes next.
    fn flag(&mut self, name: &[u8]) -> bool {
        self.attempt(|s| {
            s.key(name)?;
            s.lit(b"true")
        })
        .is_some()
    }

    /// Consumes `,"NAME":` if it comes next.
    fn optional_key(&mut self, name: &[u8]) -> bool {
        self.attempt(|s| s.key(name)).is_some()
    }

    /// The closing brace, and nothing after it.
    fn end(&mut self) -> Option<()> {
        self.lit(b"}")?;
        (self.at == self.bytes.len()).then_some(())
    }
}

/// A `launch` line as the writer spells it.
pub(super) fn launch(line: &[u8]) -> Option<Launch> {
    let mut s = Scan::new(line);
    let (ts, pid, tid, lib, api) = s.head(b"launch")?;
    s.key(b"kernel")?;
    let kernel = if s.lit(b"null").is_some() { None } else { Some(s.u32()?) };
    let handle = s.keyed(b"handle", Scan::u64)?;
    let grid = s.keyed(b"grid", Scan::u32x3)?;
    let block = s.keyed(b"block", Scan::u32x3)?;
    s.key(b"grid_unit")?;
    let grid_unit = match s.str()? {
        "blocks" => GridUnit::Blocks,
        "work-items" => GridUnit::WorkItems,
        _ => return None,
    };
    let shmem = s.keyed(b"shmem", Scan::u64)?;
    let stream = s.keyed(b"stream", Scan::u64)?;
    s.key(b"ret")?;
    let ret = s.i64()?.try_into().ok()?;
    let dur = s.keyed(b"dur", Scan::u64)?;
    let captured = s.flag(b"captured");
    let entry_only = s.flag(b"entry_only");
    s.end()?;
    Some(Launch {
        ts,
        pid,
        tid,
        lib,
        api,
        kernel,
        handle,
        grid,
        block,
        grid_unit,
        shmem,
        stream,
        ret,
        dur,
        captured,
        entry_only,
        params: Default::default(),
        caller: 0,
        in_runs: false,
    })
}

/// A `call` line as the writer spells it (one with a `file` falls back to serde: a string that may hold
/// escapes, and rare).
pub(super) fn call(line: &[u8]) -> Option<Call> {
    let mut s = Scan::new(line);
    let (ts, pid, tid, lib, api) = s.head(b"call")?;
    let ret = s.keyed(b"ret", Scan::i64)?;
    let dur = s.keyed(b"dur", Scan::u64)?;
    let mut c = Call::new(Origin { ts, pid, tid, lib }, api, ret, dur);
    // The optional fields, in the struct's order, each present or absent.
    for (name, slot) in [(&b"size"[..], &mut c.size), (b"ptr", &mut c.ptr), (b"dst", &mut c.dst), (b"src", &mut c.src)]
    {
        if s.optional_key(name) {
            *slot = Some(s.u64()?);
        }
    }
    if s.optional_key(b"kind") {
        c.kind = Some(MemcpyKind::from_name(s.str()?)?);
    }
    for (name, slot) in [
        (&b"stream"[..], &mut c.stream),
        (b"module", &mut c.module),
        (b"function", &mut c.function),
        (b"handle", &mut c.handle),
    ] {
        if s.optional_key(name) {
            *slot = Some(s.u64()?);
        }
    }
    if s.optional_key(b"attribute") {
        c.attribute = Some(s.u32()?);
    }
    if s.optional_key(b"value") {
        c.value = Some(s.u64()?);
    }
    c.entry_only = s.flag(b"entry_only");
    s.end()?;
    Some(c)
}

/// `,"NAME":` as one literal.
macro_rules! key {
    ($name:literal) => {
        concat!(",\"", $name, "\":").as_bytes()
    };
}

/// Appends JSON as serde writes it, for the parts of the two hot records. Each key is one literal (`key!`),
/// copied at once.
struct Spell<'a>(&'a mut Vec<u8>);

impl Spell<'_> {
    fn raw(&mut self, text: &[u8]) {
        self.0.extend_from_slice(text);
    }

    fn num(&mut self, v: impl itoa::Integer) {
        self.raw(itoa::Buffer::new().format(v).as_bytes());
    }

    /// A string from one of tracer's own tables: no byte in it needs an escape (checked by `tests`).
    fn str(&mut self, text: &str) {
        self.raw(b"\"");
        self.raw(text.as_bytes());
        self.raw(b"\"");
    }

    fn keyed(&mut self, key: &[u8], v: impl itoa::Integer) {
        self.raw(key);
        self.num(v);
    }

    fn optional(&mut self, key: &[u8], v: Option<impl itoa::Integer>) {
        if let Some(v) = v {
            self.keyed(key, v);
        }
    }

    fn u32x3(&mut self, key: &[u8], [x, y, z]: [u32; 3]) {
        self.raw(key);
        self.raw(b"[");
        self.num(x);
        self.raw(b",");
        self.num(y);
        self.raw(b",");
        self.num(z);
        self.raw(b"]");
    }

    /// The common head of both record types: type and ts.
    fn head(&mut self, type_key: &[u8], ts: u64) {
        self.raw(type_key);
        self.keyed(key!("ts"), ts);
    }

    /// What both record types say next: pid, tid, lib, api.
    fn who(&mut self, (pid, tid, lib, api): (u32, u32, u32, ApiFunc)) {
        self.keyed(key!("pid"), pid);
        self.keyed(key!("tid"), tid);
        self.keyed(key!("lib"), lib);
        self.raw(key!("api"));
        self.str(api.name());
    }

    fn flag(&mut self, set_key: &[u8], set: bool) {
        if set {
            self.raw(set_key);
        }
    }
}

/// The spelled rest (after `ts`) of recent launch lines, keyed by the launch without its time and caller (the
/// fields the rest does not spell; every other field is in the key, a field added later too): a loop repeats
/// the same launches, whose lines differ only in their time, so a repeated one costs its time's digits and
/// one copy instead of some thirty small ones (the spelling's copies were 9 % of tracer's CPU at 60 000
/// launches/s on the stand-in). At most [`TAILS_MAX`] are kept; the cache starts afresh when full.
#[derive(Default)]
pub(super) struct LaunchTails(crate::os::FastMap<Launch, Box<[u8]>>);

/// Most launch tails kept: a decode step's distinct launches many times over, some 1 MiB at most.
const TAILS_MAX: usize = 4096;

/// Appends a `launch` record's line (without its newline) as serde spells it; false, with nothing
/// written, for one whose kernel parameters or unit this does not spell.
pub(super) fn spell_launch(l: &Launch, out: &mut Vec<u8>, tails: &mut LaunchTails) -> bool {
    if !l.params.is_empty() || l.grid_unit == GridUnit::Unknown {
        return false;
    }
    let key = Launch { ts: 0, caller: 0, in_runs: false, ..l.clone() };
    let mut w = Spell(out);
    w.head(b"{\"type\":\"launch\"", l.ts);
    if let Some(tail) = tails.0.get(&key) {
        w.raw(tail);
        return true;
    }
    let at = w.0.len();
    spell_launch_tail(l, &mut w);
    if tails.0.len() >= TAILS_MAX {
        tails.0.clear();
    }
    tails.0.insert(key, w.0.get(at..).unwrap_or_default().into());
    true
}

/// A launch line after its time. Every field is named: one added to `Launch` does not build until it is
/// spelled here (or said to be written elsewhere).
fn spell_launch_tail(l: &Launch, w: &mut Spell<'_>) {
    let Launch {
        // Written by the line's head; kernel parameters go through serde (`spell_launch`); not written.
        ts: _,
        params: _,
        caller: _,
        in_runs: _,
        pid,
        tid,
        lib,
        api,
        kernel,
        handle,
        grid,
        block,
        grid_unit,
        shmem,
        stream,
        ret,
        dur,
        captured,
        entry_only,
    } = l;
    w.who((*pid, *tid, *lib, *api));
    w.raw(key!("kernel"));
    match kernel {
        Some(k) => w.num(*k),
        None => w.raw(b"null"),
    }
    w.keyed(key!("handle"), *handle);
    w.u32x3(key!("grid"), *grid);
    w.u32x3(key!("block"), *block);
    w.raw(key!("grid_unit"));
    w.str(grid_unit.as_str());
    w.keyed(key!("shmem"), *shmem);
    w.keyed(key!("stream"), *stream);
    w.keyed(key!("ret"), *ret);
    w.keyed(key!("dur"), *dur);
    w.flag(b",\"captured\":true", *captured);
    w.flag(b",\"entry_only\":true", *entry_only);
    w.raw(b"}");
}

/// Appends a `call` record's line (without its newline) as serde spells it; false, with nothing written,
/// for one with a file, a bundle or a copy direction this build does not know. Every field is named: one
/// added to `Call` does not build until it is spelled here (or left to serde).
pub(super) fn spell_call(c: &Call, out: &mut Vec<u8>) -> bool {
    let Call {
        ts,
        pid,
        tid,
        lib,
        api,
        ret,
        dur,
        size,
        ptr,
        dst,
        src,
        kind,
        stream,
        module,
        function,
        handle,
        attribute,
        value,
        file,
        file_offset,
        bundle,
        entry_only,
        // Not written.
        caller: _,
    } = c;
    let kind = match kind {
        Some(MemcpyKind::Unknown(_)) => return false,
        Some(k) => Some(k.name()),
        None => None,
    };
    // Left to serde.
    if file.is_some() || file_offset.is_some() || bundle.is_some() {
        return false;
    }
    let mut w = Spell(out);
    w.head(b"{\"type\":\"call\"", *ts);
    w.who((*pid, *tid, *lib, *api));
    w.keyed(key!("ret"), *ret);
    w.keyed(key!("dur"), *dur);
    w.optional(key!("size"), *size);
    w.optional(key!("ptr"), *ptr);
    w.optional(key!("dst"), *dst);
    w.optional(key!("src"), *src);
    if let Some(kind) = kind {
        w.raw(key!("kind"));
        w.str(&kind);
    }
    w.optional(key!("stream"), *stream);
    w.optional(key!("module"), *module);
    w.optional(key!("function"), *function);
    w.optional(key!("handle"), *handle);
    w.optional(key!("attribute"), *attribute);
    w.optional(key!("value"), *value);
    w.flag(b",\"entry_only\":true", *entry_only);
    w.raw(b"}");
    true
}

#[cfg(test)]
mod tests;
