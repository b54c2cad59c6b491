//! Debian unstable's `llama-server` on the null GPU (issue 58, step 4): ggml 0.27's HIP backend with every layer
//! offloaded, two slots, two requests at once, in the qemu guest of `fixtures/kmod/guest.sh` with the TEST DOUBLE
//! of AMD's GPU kernel driver (`fixtures/kmod/null_gpu.c`; see `null_gpu.rs`). The root is Debian's, shared
//! read-only over 9p, no file changed, no environment variable set; the requests come from the root's own Python.

use integration_tests::*;

use crate::{
    debian_llama::{ASK_TWO, check_server, timings_of},
    null_gpu::dispatched_names,
};

/// `llama-server -np 2` on the null GPU, a random-weight `Q4_K_M` model, two requests sent at once (prompts of 11
/// and 23 token ids, 8 and 12 tokens generated). Recorded from its start, its phases' tokens equal the server's
/// own timings, with the 4 tokens of its two start-up decodes; attached late (`--pid`, once it answers
/// `/health`), the same without them. Each recording reads every step's batch (both slots' sequences share
/// steps), loses nothing, and names every kernel the server dispatched at the null GPU's doorbells, those of
/// the late one included: the code objects HIP loaded before the attach are read from `ROCr`'s loader list.
#[test]
fn llama_server_with_two_slots_on_the_null_gpu_has_the_server_s_own_tokens_from_its_start_and_attached_late() {
    let sid = std::env::var("TRACER_SID_ROOT").expect("TRACER_SID_ROOT is set by `cargo xtask test`");
    let files = scratch("null-gpu-server");
    tiny_llama(&files.join("f16.gguf"));
    std::fs::write(files.join("ask.py"), ASK_TWO).expect("scratch file");
    // The guest's loopback is down until brought up (the server and its clients use it).
    let out = guest(
        "S=/guest/9p
         for d in proc sys dev tmp; do mount --bind /$d $S/$d; done
         ip link set lo up
         cp /guest/f16.gguf /guest/ask.py /tmp/
         chroot $S llama-quantize /tmp/f16.gguf /tmp/q4.gguf Q4_K_M > /tmp/q.out 2>&1 || { cat /tmp/q.out; exit 1; }
         serve='llama-server -m /tmp/q4.gguf -ngl 99 -np 2 -c 2048 --port'
         ask() {
           chroot $S python3 /tmp/ask.py $1 > /tmp/$2.ask 2> /tmp/$2.err || { cat /tmp/$2.err; exit 1; }
           echo \"@@BEGIN $2-ask\"; cat /tmp/$2.ask; echo \"@@END $2-ask\"
         }
         ended() {
           wait $1 || { echo \"tracer failed\"; cat /tmp/$2.out; exit 1; }
           echo \"@@BEGIN $2\"; cat /tmp/$2.jsonl; echo \"@@END $2\"; rm /tmp/$2.jsonl
         }
         timeout 1200 tracer record -q -o /tmp/start.jsonl -- chroot $S $serve 8080 > /tmp/start.out 2>&1 &
         rec=$!
         ask 8080 start
         kill $(pidof llama-server)
         ended $rec start
         chroot $S $serve 8081 > /tmp/server.out 2>&1 &
         srv=$!
         until wget -q -O /dev/null http://127.0.0.1:8081/health 2> /dev/null; do sleep 1; done
         timeout 1200 tracer record -q --ready-file /tmp/ready -o /tmp/late.jsonl --pid $srv > /tmp/late.out 2>&1 &
         rec=$!
         until [ -f /tmp/ready ]; do sleep 1; done
         ask 8081 late
         kill $srv
         ended $rec late",
        &[
            ("GUEST_NULL_GPU", "1"),
            ("GUEST_9P", &sid),
            ("GUEST_MEM", "6144"),
            ("GUEST_TIMEOUT", "2400"),
            ("GUEST_FILES", files.to_str().expect("UTF-8 path")),
        ],
    );
    drop(std::fs::remove_dir_all(&files));
    for (run, startup_prompt) in [("start", 4), ("late", 0)] {
        let timings = timings_of(section(&out, &format!("{run}-ask")).as_bytes());
        let path = guest_trace_file(&out, run);
        let records = read_trace(&path);
        check_server(&records, &path, &timings, startup_prompt);
        let names = dispatched_names(&records);
        assert!(names.len() > 100, "{run}: {} dispatches", names.len());
        assert!(names.iter().all(Option::is_some), "{run}: every dispatch named");
        println!("{run}: the server's timings {timings:?}; {} dispatches, every one named", names.len());
    }
}
