//! `ROCr`'s list of loaded code objects, read from a running process: how AQL dispatches of code objects
//! loaded before tracer attached get their names.
//!
//! libhsa-runtime64 exports `_amdgpu_r_debug`, a glibc `struct r_debug` (`r_version` at 0, `r_map` at 8,
//! `r_brk` at 16, `r_state` at 24, `r_ldbase` at 32; `ROCr` `loader/executable.cpp`). Each code object an
//! executable loads adds a glibc `struct link_map` to that list: `l_addr` (0) is its load delta, `l_name`
//! (8) a URI, `l_next` (24) the next entry. The URI is `file://PATH[#offset=O&size=S]` (the path
//! percent-encoded) or `memory://PID#offset=0xADDR&size=S` (`ROCr` `amd_hsa_loader.cpp`; the grammar is in
//! `hsa_ven_amd_loader.h`). A dispatch's `kernel_object` is `l_addr + st_value` of the code object's
//! `NAME.kd` symbol. Everything here reads; the process is never stopped.
//!
//! The list read for one process, and its kernel objects named: `of/rocr.rs`.

use std::collections::HashSet;

use super::memory::{Memory, read_c_string, read_u64};

/// The exported data symbol that heads the list.
pub(crate) const R_DEBUG_SYMBOL: &str = "_amdgpu_r_debug";

/// Entries read at most per list: a corrupt or cyclic list ends there, counted.
pub(crate) const MAX_ENTRIES: usize = 65_536;

/// One loaded code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LoadedObject {
    /// `l_addr`: what the loader added to the code object's virtual addresses.
    pub(crate) load_delta: u64,
    /// `l_name`.
    pub uri: String,
}

/// What one walk of the list gave.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct List {
    pub objects: Vec<LoadedObject>,
    /// Entries whose URI could not be read.
    pub(crate) unreadable: usize,
    /// The walk stopped at [`MAX_ENTRIES`] or at an entry seen before.
    pub(crate) truncated: bool,
}

/// Walks the list headed by the `r_debug` at `r_debug`; None when the head cannot be read.
pub(crate) fn walk(mem: &impl Memory, r_debug: u64) -> Option<List> {
    let mut next = read_u64(mem, r_debug.checked_add(8)?)?;
    let mut list = List::default();
    let mut seen = HashSet::new();
    while next != 0 {
        if list.objects.len() + list.unreadable >= MAX_ENTRIES || !seen.insert(next) {
            list.truncated = true;
            break;
        }
        let entry = next;
        let (Some(load_delta), Some(name), Some(following)) =
            (read_u64(mem, entry), read_u64(mem, entry.wrapping_add(8)), read_u64(mem, entry.wrapping_add(24)))
        else {
            // The chain itself is broken here: what was read so far stands.
            list.truncated = true;
            break;
        };
        match read_c_string(mem, name) {
            Some(uri) => list.objects.push(LoadedObject { load_delta, uri }),
            None => list.unreadable += 1,
        }
        next = following;
    }
    Some(list)
}

/// Where a code object's bytes are, from its URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Uri {
    /// A file as the process sees it (decoded), and the code object's range in it; `size` None: the
    /// whole file (or all of it from `offset`).
    File { path: String, offset: u64, size: Option<u64> },
    /// Memory of a process.
    Memory { pid: u32, addr: u64, size: u64 },
}

/// A number of the URI grammar: decimal, `0x` hexadecimal or `0` octal.
fn number(s: &str) -> Option<u64> {
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// `offset=O&size=S` after `#` or `?`.
fn range(s: &str) -> Option<(u64, u64)> {
    let (offset, size) = s.split_once('&')?;
    Some((number(offset.strip_prefix("offset=")?)?, number(size.strip_prefix("size=")?)?))
}

/// `%XX` escapes of a path.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Parses a code object URI; None for anything outside the grammar.
pub(crate) fn parse_uri(uri: &str) -> Option<Uri> {
    if let Some(rest) = uri.strip_prefix("file://") {
        let (path, range_part) = match rest.find(['#', '?']) {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        let (offset, size) = match range_part {
            Some(r) => {
                let (o, s) = range(r)?;
                (o, (s != 0).then_some(s))
            }
            None => (0, None),
        };
        return Some(Uri::File { path: percent_decode(path)?, offset, size });
    }
    let rest = uri.strip_prefix("memory://")?;
    let at = rest.find(['#', '?'])?;
    let (addr, size) = range(&rest[at + 1..])?;
    Some(Uri::Memory { pid: rest[..at].parse().ok()?, addr, size })
}

/// The kernels of a code object: (NAME, `st_value` of `NAME.kd`).
pub(crate) fn kernel_descriptors<'d, R: object::ReadRef<'d>>(code_object: R) -> Option<Vec<(String, u64)>> {
    object::File::parse(code_object).ok().map(|elf| super::bundle::kernel_symbols(&elf))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A process image: address -> bytes.
    #[derive(Default)]
    struct Image(BTreeMap<u64, Vec<u8>>);

    impl Image {
        fn put(&mut self, addr: u64, bytes: &[u8]) {
            self.0.insert(addr, bytes.to_vec());
        }
        /// A string at the start of a readable page.
        fn put_str(&mut self, addr: u64, s: &str) {
            let mut page = s.as_bytes().to_vec();
            page.resize(4096, 0);
            self.put(addr, &page);
        }
        fn put_u64s(&mut self, addr: u64, words: &[u64]) {
            self.put(addr, &words.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>());
        }
    }

    impl Memory for Image {
        fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
            let Some((start, bytes)) = self.0.range(..=addr).next_back() else { return false };
            let at = (addr - start) as usize;
            let Some(src) = bytes.get(at..at + buf.len()) else { return false };
            buf.copy_from_slice(src);
            true
        }
    }

    fn link_map(image: &mut Image, at: u64, delta: u64, name: u64, next: u64) {
        image.put_u64s(at, &[delta, name, 0, next, 0]);
    }

    #[test]
    fn walks_the_list_in_order_and_counts_what_it_cannot_read() {
        let mut m = Image::default();
        m.put_u64s(0x1000, &[1, 0x2000, 0x9999, 0, 0]);
        link_map(&mut m, 0x2000, 0x7000_0000, 0x3000, 0x2100);
        link_map(&mut m, 0x2100, 0x7100_0000, 0x9000, 0x2200); // name unreadable
        link_map(&mut m, 0x2200, 0x7200_0000, 0x4000, 0);
        m.put_str(0x3000, "file:///opt/lib/libggml-hip.so#offset=4096&size=8192");
        m.put_str(0x4000, "memory://42#offset=0x7f00&size=100");
        let list = walk(&m, 0x1000).unwrap();
        assert_eq!(list.unreadable, 1);
        assert!(!list.truncated);
        let got: Vec<(u64, &str)> = list.objects.iter().map(|o| (o.load_delta, o.uri.as_str())).collect();
        assert_eq!(
            got,
            [
                (0x7000_0000, "file:///opt/lib/libggml-hip.so#offset=4096&size=8192"),
                (0x7200_0000, "memory://42#offset=0x7f00&size=100")
            ]
        );
        // A cycle ends the walk, marked.
        link_map(&mut m, 0x2200, 0x7200_0000, 0x4000, 0x2000);
        let list = walk(&m, 0x1000).unwrap();
        assert!(list.truncated);
        assert_eq!(list.objects.len(), 2);
        // An unreadable head: nothing to say.
        assert_eq!(walk(&m, 0x8000), None);
    }

    #[test]
    fn uris_of_the_grammar() {
        assert_eq!(
            parse_uri("file:///opt/ollama/lib/ollama/rocm/lib%20ggml.so#offset=0x1000&size=4096"),
            Some(Uri::File { path: "/opt/ollama/lib/ollama/rocm/lib ggml.so".into(), offset: 4096, size: Some(4096) })
        );
        assert_eq!(
            parse_uri("file:///tmp/k.hsaco"),
            Some(Uri::File { path: "/tmp/k.hsaco".into(), offset: 0, size: None })
        );
        assert_eq!(
            parse_uri("file:///tmp/k.hsaco?offset=010&size=0"),
            Some(Uri::File { path: "/tmp/k.hsaco".into(), offset: 8, size: None })
        );
        assert_eq!(
            parse_uri("memory://1234#offset=0x7f12a000&size=6752"),
            Some(Uri::Memory { pid: 1234, addr: 0x7f12_a000, size: 6752 })
        );
        for bad in ["memory://1234", "memory://x#offset=1&size=2", "file:///a#offset=1", "http://x", "file:///%zz"] {
            assert_eq!(parse_uri(bad), None, "{bad}");
        }
    }
}
