//! The batch a model's step is given, read at entry: llama.cpp's `llama_decode(ctx, struct llama_batch
//! batch)` (the C API of llama.cpp releases before the extended batch, which Ollama's runner and
//! llama-cpp-python call) or `llama_process(ctx, type, struct llama_batch_ext* batch)` (llama.cpp's own
//! tools since: llama-server, llama-bench, llama-cli); and the calls into GPU libraries made during the
//! step before it.
//!
//! `struct llama_batch` (llama.h) is 56 bytes passed by value: on x86-64 `SysV` it lies on the caller's
//! stack, at `[rsp+8]` at the callee's entry: `{i32 n_tokens; token*; embd*; pos*; n_seq_id*; seq_id**;
//! logits*}`. Per token the probe keeps its first sequence id, its position, how many sequences it belongs
//! to and whether its output (logits) is asked for; user space groups them into sequences. The arrays are
//! read whole (one read each); only the sequence ids need one read per token (`seq_id[i]` points to the
//! token's own array).
//!
//! `llama_batch_ext` is a C++ object (`src/llama-batch.h`) whose layout changes between llama.cpp releases
//! (the pinned release's 96-byte token, Debian's 0.7.0 112-byte one with its fields 16 bytes further): its
//! `std::vector<token> tokens` and, in each token, the output flag, the `std::unordered_set<seq_id>` and
//! the positions lie where [`ExtLayout`] says, read from the library's own code by user space and handed
//! to the probe in its attach cookie. libstdc++'s hash table keeps its first node 16 bytes into the set
//! and its element count at 24 (its ABI since GCC 5); a node is `{next, int value}`, the value at byte 8.
//! Two reads per token: the token, then its first sequence node.

use crate::RecordHeader;

/// Most tokens of one batch read (llama-server's default `n_batch`); the rest are counted, never guessed.
pub const BATCH_TOKENS_MAX: usize = 2048;
/// Tokens read per chunk of the batch's arrays (one read of each array per chunk).
pub const BATCH_CHUNK: usize = 64;
/// Slots of a process's step tally of library calls: slot `n` counts the entry library numbered `n`
/// (from 1); the last slot counts every library numbered from it on. Slot 0 is unused.
pub const STEP_SLOTS: usize = 16;

/// `pos` was given (else the context numbers tokens itself: `llama_batch_get_one`).
pub const BATCH_POS: u32 = 1;
/// `seq_id` and `n_seq_id` were given (else every token is sequence 0's).
pub const BATCH_SEQ: u32 = 1 << 1;
/// `logits` was given (else only the last token's output is asked for).
pub const BATCH_LOGITS: u32 = 1 << 2;
/// The batch carries embeddings instead of token ids (`embd` set).
pub const BATCH_EMBD: u32 = 1 << 3;
/// The structure on the stack could not be read: nothing else is known.
pub const BATCH_STACK_FAULT: u32 = 1 << 4;
/// An array of the batch could not be read: `read` tokens were read before it.
pub const BATCH_FAULT: u32 = 1 << 5;
/// The process's step tally could not be kept (map full): `step_calls` holds nothing.
pub const BATCH_NO_TALLY: u32 = 1 << 6;
/// An extended batch (`llama_process`), read from its C++ tokens.
pub const BATCH_EXT: u32 = 1 << 7;
/// `llama_process` was asked to encode (an encoder pass), not to decode.
pub const BATCH_ENCODE: u32 = 1 << 8;

/// Where one build of libllama lays out `llama_batch_ext` (byte offsets).
///
/// Read from its code, carried in the attach cookie of its `llama_process` probe (bits 17..48, which no
/// other flag of that probe uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtLayout {
    /// `std::vector<token> tokens` in the batch (a multiple of 8, at most 504).
    pub tokens: u64,
    /// Bytes of one token (a multiple of 8, at most 504).
    pub token_bytes: u64,
    /// In a token: its output flag (one byte, below 128).
    pub output: u64,
    /// In a token: its `std::unordered_set<llama_seq_id>` (a multiple of 8, at most 224: its
    /// first node and count lie in a token's first 256 bytes).
    pub seq_set: u64,
    /// In a token: its first position (`i32`, a multiple of 4, at most 252).
    pub pos: u64,
}

/// The cookie bit that says an [`ExtLayout`] is packed beside it.
const EXT_KNOWN: u64 = 1 << 17;

impl ExtLayout {
    /// In a token: the sequence set's first node (libstdc++'s `_M_before_begin._M_nxt`).
    pub const fn seq_node(self) -> u64 {
        self.seq_set + 16
    }

    /// In a token: the sequence set's element count.
    pub const fn seq_count(self) -> u64 {
        self.seq_set + 24
    }

    /// Whether the fields fit the cookie's bits and lie inside a token.
    pub const fn fits(self) -> bool {
        self.tokens.is_multiple_of(8)
            && self.tokens <= 504
            && self.token_bytes.is_multiple_of(8)
            && self.token_bytes >= 8
            && self.token_bytes <= 504
            && self.output < 128
            && self.output < self.token_bytes
            && self.seq_set.is_multiple_of(8)
            && self.seq_set <= 224
            && self.seq_set + 32 <= self.token_bytes
            && self.pos.is_multiple_of(4)
            && self.pos <= 252
            && self.pos + 4 <= self.token_bytes
    }

    /// The cookie bits of this layout, or None when it does not [fit](Self::fits).
    pub const fn cookie_bits(self) -> Option<u64> {
        if !self.fits() {
            return None;
        }
        Some(
            EXT_KNOWN
                | ((self.tokens / 8) << 18)
                | ((self.token_bytes / 8) << 24)
                | (self.output << 30)
                | ((self.seq_set / 8) << 37)
                | ((self.pos / 4) << 42),
        )
    }

    /// The layout an attach cookie carries, if any. Every field is masked to its bits, so the eBPF verifier
    /// knows each one's bound.
    pub const fn of_cookie(c: u64) -> Option<Self> {
        if c & EXT_KNOWN == 0 {
            return None;
        }
        let l = Self {
            tokens: ((c >> 18) & 63) * 8,
            token_bytes: ((c >> 24) & 63) * 8,
            output: (c >> 30) & 127,
            seq_set: ((c >> 37) & 31) * 8,
            pos: ((c >> 42) & 63) * 4,
        };
        if l.fits() { Some(l) } else { None }
    }
}

/// In a node of the sequence set: the sequence id.
pub const EXT_NODE_VALUE: u64 = 8;
/// Bytes of the probe's buffer for one token: [`ExtLayout::token_bytes`] is at most this.
pub const EXT_TOKEN_MAX: usize = 512;

/// A `llama_decode` call, at entry: the start of one inference step.
///
/// Written with its used length only: this head, then `laid` tokens' arrays one after the other: their
/// first sequence ids (`i32`, valid for the first `read`), positions (`i32`), sequence counts (`i32`) and
/// output flags (`i8`), as the batch holds them (see [`batch_arrays`]).
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchRecord {
    pub header: RecordHeader,
    /// The `llama_context*`: sequences are a context's.
    pub ctx: u64,
    /// This process's `llama_decode` calls the kernel saw so far, this one included.
    pub step: u64,
    /// Calls into each entry library ([`STEP_SLOTS`]) the process made since its previous
    /// `llama_decode`: during the previous step.
    pub step_calls: [u64; STEP_SLOTS],
    /// `n_tokens` as given.
    pub n_tokens: i32,
    /// Tokens the arrays after the head have room for: `n_tokens`, at most [`BATCH_TOKENS_MAX`].
    pub laid: u32,
    /// Tokens whose every array was read (`laid` unless an array could not be read: [`BATCH_FAULT`]).
    pub read: u32,
    /// [`BATCH_POS`], [`BATCH_SEQ`], ...
    pub flags: u32,
    /// The probe's own scratch (a chunk's token count), meaningless to readers.
    pub pad_chunk: u32,
    pub pad: u32,
}

/// Bytes of a [`BatchRecord`]'s head, before its arrays.
pub const BATCH_HEAD: usize = size_of::<BatchRecord>();
/// Bytes of the arrays per token laid out: sequence id, position, sequence count (4 each), output (1).
pub const BATCH_TOKEN_BYTES: usize = 13;

/// Where each array of a record laid out for `laid` tokens starts, after the head: (sequence ids,
/// positions, sequence counts, outputs), and the bytes of all four.
pub const fn batch_arrays(laid: usize) -> ([usize; 4], usize) {
    ([0, 4 * laid, 8 * laid, 12 * laid], BATCH_TOKEN_BYTES * laid)
}

/// A process's library calls counted in the kernel since its last `llama_decode` (the eBPF map's value,
/// keyed by tgid), and its steps so far.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepTally {
    pub step: u64,
    pub calls: [u64; STEP_SLOTS],
}

/// The library calls a process made since its previous pass, cut at its next.
///
/// Written where a process without batches (no `llama_decode`: ggml linked into a program, Ollama's
/// engines) hands a graph to ggml's scheduler: its step tally's counts, moved out, so that each call lands
/// in the pass (and the step) it was made in.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepCutRecord {
    pub header: RecordHeader,
    /// Calls per step slot (an entry library's id, see [`step_slot`]).
    pub calls: [u64; STEP_SLOTS],
}

/// The step slot an entry library's calls are counted in (see [`STEP_SLOTS`]).
pub const fn step_slot(library: u32) -> u64 {
    if library as usize >= STEP_SLOTS { (STEP_SLOTS - 1) as u64 } else { library as u64 }
}
