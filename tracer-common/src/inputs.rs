//! A pass's graph inputs as ggml's scheduler copies them to a device: llama.cpp's token positions
//! (`inp_pos`) and output rows (`out_ids`), read at `ggml_backend_tensor_set` in libggml-base, where no
//! model library is probed (a runner that links llama.cpp in, as Ollama's llama engine does, maps none).

use crate::RecordHeader;

/// Most values (positions or rows, 4 bytes each) one input record holds: a micro-batch of llama.cpp's
/// default size four times over.
pub const INPUT_VALUES_MAX: usize = 2048;

/// The byte offset of `name` in ggml's `struct ggml_tensor`.
///
/// `ggml.h`: type and buffer, `ne[4]`, `nb[4]`, op, 64 bytes of op parameters, flags, ten sources, the view's
/// source and offset, data: 256 bytes.
pub const GGML_TENSOR_NAME: u64 = 256;

/// Bytes of a tensor's name the probe reads: the scheduler names a device copy `BACKEND#NAME#COPY`
/// (`CUDA0#inp_pos#0`), with a backend name of at most 16 bytes before its `#`.
pub const INPUT_NAME_BYTES: usize = 32;

/// The input holds token positions (`inp_pos`, one `i32` per token; four per token under M-RoPE).
pub const INPUT_POSITIONS: u32 = 1;
/// The input holds the rows whose output is kept (`out_ids`, one `i32` per output, in batch order).
pub const INPUT_OUTPUT_ROWS: u32 = 2;
/// The values could not be read (they are then not given).
pub const INPUT_FAULT: u32 = 1 << 8;

/// One input copied up (its head; `read` values follow, 4 bytes each, the record written with its used
/// length).
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputRecord {
    pub header: RecordHeader,
    /// The device tensor's address.
    pub tensor: u64,
    /// Bytes set, and where in the tensor.
    pub size: u64,
    pub offset: u64,
    /// [`INPUT_POSITIONS`] or [`INPUT_OUTPUT_ROWS`], with [`INPUT_FAULT`].
    pub which: u32,
    /// Values that follow (at most [`INPUT_VALUES_MAX`]).
    pub read: u32,
}

/// Bytes of an [`InputRecord`]'s head, before its values.
pub const INPUT_HEAD: usize = size_of::<InputRecord>();

/// Which input a device copy's name names: `BACKEND#inp_pos#N` or `BACKEND#out_ids#N`; none for any other
/// tensor (the weights, the other inputs, a tensor set by the program itself rather than copied up).
#[inline(always)]
pub const fn input_of_name(name: &[u8; INPUT_NAME_BYTES]) -> Option<u32> {
    // Byte by byte at constant indexes (the loop unrolls): the eBPF side has no `memcmp`.
    let mut i = 1;
    while i <= 16 {
        if name[i] == b'#' {
            let word = u64::from_ne_bytes([
                name[i + 1],
                name[i + 2],
                name[i + 3],
                name[i + 4],
                name[i + 5],
                name[i + 6],
                name[i + 7],
                name[i + 8],
            ]);
            return if word == u64::from_ne_bytes(*b"inp_pos#") {
                Some(INPUT_POSITIONS)
            } else if word == u64::from_ne_bytes(*b"out_ids#") {
                Some(INPUT_OUTPUT_ROWS)
            } else {
                None
            };
        }
        if name[i] == 0 {
            return None;
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> [u8; INPUT_NAME_BYTES] {
        let mut n = [0; INPUT_NAME_BYTES];
        n[..s.len()].copy_from_slice(s.as_bytes());
        n
    }

    #[test]
    fn the_scheduler_s_copies_of_positions_and_output_rows_only() {
        assert_eq!(input_of_name(&name("CUDA0#inp_pos#0")), Some(INPUT_POSITIONS));
        assert_eq!(input_of_name(&name("Vulkan0#out_ids#1")), Some(INPUT_OUTPUT_ROWS));
        assert_eq!(input_of_name(&name("ROCm0#inp_pos#0")), Some(INPUT_POSITIONS));
        // The program's own tensors, other inputs, and copies of other tensors are not read.
        for other in ["inp_pos", "out_ids", "CUDA0#inp_embd#0", "CUDA0#attn_inp_kq_mask#0", "#inp_pos#0", ""] {
            assert_eq!(input_of_name(&name(other)), None, "{other}");
        }
        // A backend name longer than the probe looks through.
        assert_eq!(input_of_name(&name("AVeryLongBackendName0#inp_pos#0")), None);
    }
}
