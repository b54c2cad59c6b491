//! clang offload bundles: the GPU code a HIP library or program carries, read as hostile input.
//!
//! A `.hip_fatbin` section (or a bundle file of its own) holds bundles one after another, numbered 0000,
//! 0001, … as extraction tools number them. [`FatBinary::walk`] indexes them by their headers alone: each
//! bundle's place and length, its entries (target triple, gfx target, code object range) when plain, its
//! method and sizes when compressed (clang's CCOB, zstd or zlib, versions 1–3). No code object is read and
//! nothing is decompressed until a kernel in that bundle is asked for ([`FatBinary::kernels`]); then one
//! bundle is opened, its code objects parsed for their `NAME.kd` kernel descriptors (and, when asked, the
//! resources the compiler recorded in the metadata note), and dropped.
//!
//! Every header is someone's claim: offsets and sizes are checked arithmetic against the bytes that are
//! there, each step of the walk moves forward, and the caps below end what no real file needs (each cut
//! says why). A leaf: names only, no classification. The walk is in `walk`, opening a bundle in `open`, a code object's
//! kernels in `code_object`.

mod code_object;
mod open;
mod walk;

pub(crate) use code_object::{Resources, kernel_symbols};
pub(crate) use open::{Bundle, NameIndex, open_all, open_bytes};
pub(crate) use walk::*;
