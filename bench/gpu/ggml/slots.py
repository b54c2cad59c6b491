"""Issue 38's checks on a llama-server run with several slots: four requests sent at once, their timings
kept; then the server's tokens and decode calls compared with the steps tracer gave (`tracer report
--json`).

  slots.py ask PORT OUT.json          four concurrent completions (prompts of 11, 23, 290 and 600 token ids;
                                      8, 12, 16, 20 tokens generated; greedy, EOS ignored, no prompt cache)
  slots.py ask-two-then-one PORT OUT.json
                                      the first two at once, then the third once they are answered
  slots.py check-inputs REPORT REQUESTS STARTUP_PROMPT
                                      as check, for a server whose steps tracer judged from their passes'
                                      inputs (no libllama mapped): every step so, none from batches, and the
                                      steps that decoded several sequences labelled decode or mixed
  slots.py log PERFETTO.json SERVER.log
                                      each step's decode sequences (the Perfetto steps' compositions) against
                                      the server's own -v log: its "slot decode token" lines (one per slot
                                      whose sampled token joins the batch) between its "n_batch (effective)"
                                      lines (one per decode call); the server's 2 start-up decodes come first
  slots.py check REPORT REQUESTS STARTUP_PROMPT [METRICS]
                                      prompt tokens = sum(prompt_n) + STARTUP_PROMPT (the server's start-up
                                      decodes: common_init's warm-up and common_context_can_seq_rm, 2 tokens
                                      each), decode tokens = sum(predicted_n - 1) (the last sampled token is
                                      never decoded); steps with batches vs the server's n_decode_total
"""

import json
import sys
import threading
import urllib.request

PROMPTS = ((11, 8), (23, 12), (290, 16), (600, 20))


def ask(port, path, prompts=PROMPTS):
    done = [None] * len(prompts)

    def one(i, n, predict):
        body = {"prompt": list(range(100, 100 + n)), "n_predict": predict, "temperature": 0, "ignore_eos": True,
                "cache_prompt": False}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        t = json.load(urllib.request.urlopen(req))["timings"]
        done[i] = {"prompt_n": t["prompt_n"], "predicted_n": t["predicted_n"]}

    threads = [threading.Thread(target=one, args=(i, n, p)) for i, (n, p) in enumerate(prompts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    json.dump(done, open(path, "w"))
    print("server: " + "; ".join(f"prompt {d['prompt_n']}, {d['predicted_n']} generated" for d in done))


def ask_two_then_one(port, path):
    ask(port, path, PROMPTS[:2])
    first = json.load(open(path))
    ask(port, path, PROMPTS[2:3])
    json.dump(first + json.load(open(path)), open(path, "w"))


def check_inputs(report_path, requests_path, startup_prompt):
    report, requests = json.load(open(report_path)), json.load(open(requests_path))
    want_prompt = sum(r["prompt_n"] for r in requests) + startup_prompt
    want_decode = sum(r["predicted_n"] - 1 for r in requests)
    procs = [p for p in report["processes"] if any(ph.get("steps_from_inputs") for ph in p.get("phases", []))]
    if len(procs) != 1:
        print(f"  {len(procs)} processes with steps judged from inputs: DIFFER")
        sys.exit(1)
    phases = procs[0]["phases"]
    for ph in phases:
        comps = ", ".join(f"{k} x{v}" for k, v in sorted(ph.get("compositions", {}).items(), key=lambda kv: -kv[1]))
        print(f"  {ph['phase']:<8} steps {ph['steps']:>4} (from inputs {ph.get('steps_from_inputs', 0)})  "
              f"prompt {ph.get('prompt_tokens', 0)}, decode {ph.get('decode_tokens', 0)}: {comps}")
    total = lambda key: sum(ph.get(key, 0) for ph in phases)
    prompt, decode, unread = total("prompt_tokens"), total("decode_tokens"), total("unread_tokens")
    tokens_ok = (prompt, decode, unread) == (want_prompt, want_decode, 0)
    print(f"  tokens: prompt {prompt} (server {want_prompt}), decode {decode} (server {want_decode}), "
          f"unread {unread}: " + ("MATCH" if tokens_ok else "DIFFER"))
    judged = total("steps_from_inputs") == total("steps") and total("steps_from_batches") == 0
    print(f"  steps judged from inputs: {total('steps_from_inputs')} of {total('steps')}: " + ("ALL" if judged else "NOT ALL"))
    several = {k: v for ph in phases for k, v in ph.get("compositions", {}).items() if (decodes(k) or 0) > 1}
    misplaced = [k for ph in phases if ph["phase"] not in ("decode", "mixed")
                 for k in ph.get("compositions", {}) if (decodes(k) or 0) > 1]
    labels_ok = bool(several) and not misplaced
    print(f"  steps with several decoding sequences: {several}, outside decode or mixed: {misplaced}: "
          + ("MATCH" if labels_ok else "DIFFER"))
    sys.exit(0 if tokens_ok and judged and labels_ok else 1)


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(f"llamacpp:{name} "):
            return float(line.split()[1])
    return None


def check(report_path, requests_path, startup_prompt, metrics_path=None):
    report, requests = json.load(open(report_path)), json.load(open(requests_path))
    want_prompt = sum(r["prompt_n"] for r in requests) + startup_prompt
    want_decode = sum(r["predicted_n"] - 1 for r in requests)
    ok = False
    for p in report["processes"]:
        phases = p.get("phases", [])
        if not any(ph.get("steps_from_batches") for ph in phases):
            continue
        for ph in phases:
            comps = ", ".join(f"{k} x{v}" for k, v in sorted(ph.get("compositions", {}).items(), key=lambda kv: -kv[1]))
            print(f"  {ph['phase']:<8} steps {ph['steps']:>4} (from batches {ph.get('steps_from_batches', 0)})  "
                  f"prompt {ph.get('prompt_tokens', 0)}, decode {ph.get('decode_tokens', 0)}: {comps}")
            libs = p.get("step_libraries", {})
            for lib, n in ph.get("library_calls", {}).items():
                print(f"  {'':<8} library calls: {n} into {libs.get(lib, lib)}")
        prompt = sum(ph.get("prompt_tokens", 0) for ph in phases)
        decode = sum(ph.get("decode_tokens", 0) for ph in phases)
        unread = sum(ph.get("unread_tokens", 0) for ph in phases)
        steps = sum(ph.get("steps_from_batches", 0) for ph in phases)
        ok = (prompt, decode, unread) == (want_prompt, want_decode, 0)
        print(f"  tokens: prompt {prompt} (server {want_prompt}), decode {decode} (server {want_decode}), "
              f"unread {unread}: " + ("MATCH" if ok else "DIFFER"))
        if metrics_path:
            text = open(metrics_path).read()
            n_decode = metric(text, "n_decode_total")
            busy = metric(text, "n_busy_slots_per_decode")
            startup_steps = 2 if startup_prompt else 0
            print(f"  steps with batches: {steps} = the server's n_decode_total {n_decode} + {startup_steps} start-up: "
                  + ("MATCH" if n_decode is not None and steps == n_decode + startup_steps else "DIFFER"))
            seqs = sum(int(k.split()[1]) * v for ph in phases for k, v in ph.get("compositions", {}).items()
                       if k.startswith("decode "))
            print(f"  (server: {busy} busy slots per decode on average; decode steps carried {seqs} sequences)")
            ok = ok and n_decode is not None and steps == n_decode + startup_steps
    sys.exit(0 if ok else 1)


def decodes(composition):
    """Decode sequences in a composition label: 'decode 2 seq x 1', 'mixed: ... + 1 decode', else 0."""
    if composition is None:
        return None
    if composition.startswith("decode "):
        return int(composition.split()[1])
    if composition.startswith("mixed:"):
        return int(composition.rsplit("+ ", 1)[1].split()[0])
    return 0


def log(perfetto_path, log_path):
    steps = [e for e in json.load(open(perfetto_path))["traceEvents"] if e.get("cat") == "phase"]
    traced = [decodes(e["args"].get("composition")) for e in steps]
    served, pending = [], 0
    for line in open(log_path, errors="replace"):
        if "slot decode token" in line:
            pending += 1
        elif "n_batch (effective)" in line:
            served.append(pending)
            pending = 0
    ok = traced[2:] == served
    print(f"  decode sequences per step: tracer {traced[2:]}")
    print(f"  the server's -v log:              {served}: " + ("MATCH" if ok else "DIFFER"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if sys.argv[1] == "ask":
        ask(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "ask-two-then-one":
        ask_two_then_one(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "check-inputs":
        check_inputs(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "log":
        log(sys.argv[2], sys.argv[3])
    else:
        check(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else None)
