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
//! `llama_batch_ext` is a C++ object (`src/llama-batch.h`): its `std::vector<token> tokens` lies at byte
//! [`EXT_TOKENS`]; each 96-byte token holds its output flag at byte 16, its `std::unordered_set<seq_id>`
//! at byte 24 (libstdc++'s hash table: the first node at byte 40 of the token, the element count at 48;
//! a node is `{next, int value}`, the value at byte 8) and its positions at byte 80. Two reads per token:
//! the token, then its first sequence node. Measured against g++ 12's libstdc++ (the layout its ABI has
//! kept since GCC 5).

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

/// Byte offset of `std::vector<token> tokens` in `llama_batch_ext`.
///
/// It follows `n_tokens_max`, `n_embd_inp`, `n_embd_inp_enc` (`size_t`), `n_seq_max` (`int32`, padded),
/// `mem`, `n_vocab` (padded), `n_pos_per_embd` and `n_embd`.
pub const EXT_TOKENS: u64 = 64;
/// Bytes of one `llama_batch_ext::token`.
pub const EXT_TOKEN_BYTES: u64 = 96;
/// In a token: its output flag, its sequence set's first node and element count, its first position.
pub const EXT_OUTPUT: usize = 16;
pub const EXT_SEQ_NODE: usize = 40;
pub const EXT_SEQ_COUNT: usize = 48;
pub const EXT_POS: usize = 80;
/// In a node of the sequence set: the sequence id.
pub const EXT_NODE_VALUE: u64 = 8;

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
