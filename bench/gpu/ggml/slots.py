"""Issue 38's checks on a llama-server run with several slots: four requests sent at once, their timings
kept; then the server's tokens and decode calls compared with the steps tracer gave (`tracer report
--json`).

  slots.py ask PORT OUT.json          four concurrent completions (prompts of 11, 23, 290 and 600 token ids;
                                      8, 12, 16, 20 tokens generated; greedy, EOS ignored, no prompt cache)
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


def ask(port, path):
    done = [None] * len(PROMPTS)

    def one(i, n, predict):
        body = {"prompt": list(range(100, 100 + n)), "n_predict": predict, "temperature": 0, "ignore_eos": True,
                "cache_prompt": False}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        t = json.load(urllib.request.urlopen(req))["timings"]
        done[i] = {"prompt_n": t["prompt_n"], "predicted_n": t["predicted_n"]}

    threads = [threading.Thread(target=one, args=(i, n, p)) for i, (n, p) in enumerate(PROMPTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    json.dump(done, open(path, "w"))
    print("server: " + "; ".join(f"prompt {d['prompt_n']}, {d['predicted_n']} generated" for d in done))


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
    elif sys.argv[1] == "log":
        log(sys.argv[2], sys.argv[3])
    else:
        check(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else None)
