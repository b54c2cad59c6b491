//! Where a probe goes in a function: the entry, or an instruction past it that the kernel emulates, where the
//! program reads nothing the instructions in between change.

/// Where a one-trap probe of the function at file offset `off` goes: past a leading register-register
/// `test` (`48 85 /r`, mod 11: it only sets flags) when a conditional jump follows it, else the entry.
///
/// x86 uprobes emulate a conditional jump but must single-step a `test` out of line, a second exception
/// per call. The Vulkan loader's trampolines all begin `test %rdi,%rdi; je` (libvulkan 1.3.239): probed on
/// the jump, each call traps once, with the same registers and stack as at the entry (the `test` wrote
/// flags only, which the emulated jump reads). Return probes stay at the entry.
pub(crate) fn one_trap_point(file: &crate::os::files::CodeFile, off: u64) -> u64 {
    let mut code = [0u8; 5];
    if file.read_exact_at(off, &mut code).is_err() {
        return off;
    }
    if test_then_jump(&code) { off + 3 } else { off }
}

/// Whether `code` begins with a register-register `test` (`48 85 /r`, mod 11: it only sets flags) and a
/// conditional jump after it (`70`–`7f`, or `0f 80`–`0f 8f`).
fn test_then_jump(code: &[u8]) -> bool {
    match *code {
        [0x48, 0x85, modrm, jcc, next, ..] => {
            modrm >> 6 == 0b11 && ((0x70..=0x7f).contains(&jcc) || (jcc == 0x0f && (0x80..=0x8f).contains(&next)))
        }
        _ => false,
    }
}

/// Where a probe that reads its arguments from registers alone (the input program) goes in the function at
/// `off`: on the conditional jump after a leading `test reg,reg`, past a prologue that only saves registers and
/// makes room on the stack (`endbr64`, `push`, `sub $imm,%rsp`, `mov reg,disp8(%rsp)`), none of which writes an
/// argument register; else at the entry. The jump is emulated; at the entry (`endbr64`, then six `push`es, in
/// the GPU machine's CUDA build) the probe cost llama-bench 61 µs of kernel time a decode token, about nine calls
/// (its 6.18 kernel steps such an instruction out of line: a second exception a call), on the jump 4.4 µs
/// (`bench/gpu/ggml/decode_cost.sh`, docs/figures.md). The ggml builds at hand all begin
/// `ggml_backend_tensor_set` so (the pinned one with six pushes, Debian's with `endbr64`, a `sub` and a save).
pub(crate) fn register_args_point(file: &crate::os::files::CodeFile, off: u64) -> u64 {
    let mut code = [0u8; 64];
    if file.read_exact_at(off, &mut code).is_err() {
        return off;
    }
    let mut i = 0usize;
    while i + 9 <= code.len() {
        let rex_w = code[i] == 0x48 || code[i] == 0x4c;
        let len = match code[i..] {
            [0xf3, 0x0f, 0x1e, 0xfa, ..] => 4,
            [0x50..=0x57, ..] => 1,
            [0x41, 0x50..=0x57, ..] => 2,
            [0x48, 0x83, 0xec, _, ..] => 4,
            [0x48, 0x81, 0xec, _, _, _, _, ..] => 7,
            [_, 0x89, modrm, 0x24, _, ..] if rex_w && modrm & 0xc7 == 0x44 => 5,
            [0x48, 0x85, modrm, ..] if modrm >> 6 == 0b11 => {
                return if test_then_jump(&code[i..]) { off + i as u64 + 3 } else { off };
            }
            _ => return off,
        };
        i += len;
    }
    off
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::os::files::CodeFile;

    /// Where `place` puts a probe of a function whose code is `code` (at offset 16 of a file, after 16 bytes of
    /// `int3`, followed by `nops` bytes of `nop`; a file of its own per `nops`, as the tests run side by side).
    fn point_in(code: &[u8], nops: usize, place: fn(&CodeFile, u64) -> u64) -> u64 {
        let path = std::env::temp_dir().join(format!("tracer-probe-point-{}-{nops}", std::process::id()));
        let mut bytes = vec![0xcc; 16];
        bytes.extend_from_slice(code);
        bytes.extend(std::iter::repeat_n(0x90, nops));
        fs::write(&path, &bytes).unwrap();
        let file = CodeFile::user(&path).unwrap();
        let point = place(&file, 16);
        fs::remove_file(&path).unwrap();
        point
    }

    /// The Vulkan loader's trampolines begin `test %rdi,%rdi; je`: probed on the jump. Anything else is
    /// probed at its entry.
    #[test]
    fn one_trap_probes_go_past_a_leading_test_before_a_jump() {
        let at = |code: &[u8]| point_in(code, 8, one_trap_point);
        assert_eq!(at(&[0x48, 0x85, 0xff, 0x74, 0x23]), 19); // test %rdi,%rdi; je rel8 (libvulkan 1.3.239)
        assert_eq!(at(&[0x48, 0x85, 0xf6, 0x0f, 0x84, 0, 1, 0, 0]), 19); // test %rsi,%rsi; je rel32
        assert_eq!(at(&[0x55, 0x48, 0x89, 0xe5]), 16); // push %rbp: emulated at the entry
        assert_eq!(at(&[0x48, 0x85, 0x07, 0x74, 0x23]), 16); // test %rax,(%rdi): reads memory
        assert_eq!(at(&[0x48, 0x85, 0xff, 0x48, 0x8b]), 16); // no jump after the test
    }

    /// `ggml_backend_tensor_set` as the pinned llama.cpp's build and Debian's ggml 0.27 begin it: the input probe
    /// goes on the jump after `test %rdi,%rdi`, past the prologue.
    #[test]
    fn the_input_probe_goes_past_a_prologue_that_writes_no_argument() {
        let at = |code: &[u8]| point_in(code, 64, register_args_point);
        // push %r15 .. %r12, %rbp, %rbx; sub $0x8,%rsp; test %rdi,%rdi; je rel32
        let pinned = [
            0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x55, 0x53, 0x48, 0x83, 0xec, 0x08, 0x48, 0x85, 0xff, 0x0f,
            0x84, 0xa0, 0, 0, 0,
        ];
        assert_eq!(at(&pinned), 16 + 17);
        // endbr64; sub $0x38,%rsp; mov %rbx,0x28(%rsp); test %rdi,%rdi; je rel32
        let debian = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x38, 0x48, 0x89, 0x5c, 0x24, 0x28, 0x48, 0x85, 0xff, 0x0f, 0x84,
        ];
        assert_eq!(at(&debian), 16 + 16);
        // An instruction that may write an argument register, or no jump after the test: the entry.
        assert_eq!(at(&[0x55, 0x48, 0x89, 0xfb, 0x48, 0x85, 0xff, 0x74, 0x10]), 16); // mov %rdi,%rbx
        assert_eq!(at(&[0x55, 0x48, 0x85, 0xff, 0x48, 0x8b]), 16);
        assert_eq!(at(&[0x48, 0x83, 0xc4, 0x08, 0x48, 0x85, 0xff, 0x74, 0x10]), 16); // add, not sub
    }
}
