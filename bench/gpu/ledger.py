"""Prints the ledger of `tracer report --json` (issue 27): per process, each mapped GPU library with its
status, calls, kernels of its code and their executions, and launches made from it; the executions of
kernels by the file holding their code (and those with none); each phase's steps, widths and passes; the
exact column counts of ggml's matrix kernels.

  python3 ledger.py REPORT.json
"""

import collections
import json
import sys

report = json.load(open(sys.argv[1]))
for p in report["processes"]:
    if not p["kernels"] and not any(m.get("calls") for m in p["mapped"]):
        continue
    print(f"process {p['pid']} {p['comm']}")
    for m in p["mapped"]:
        calls = "-" if m["calls"] is None else m["calls"]
        print(
            f"  {m['status']:<12} calls {calls:>8}  kernels {m['kernels']:>4}  executions {m['executions']:>7}"
            f"  launched-from {m['launches_from']:>7}  {m['path']}"
        )
        if m.get("functions"):
            print("      functions: " + ", ".join(f"{f['function']} {f['calls']}" for f in m["functions"][:6]))
    by_file = collections.Counter()
    for k in p["kernels"]:
        by_file[k.get("code_file") or "(no code file)"] += k["executions"]
    total = sum(by_file.values())
    print(f"  executions by code file ({total} in all):")
    for f, n in by_file.most_common():
        print(f"    {n:>8}  {f}")
    for ph in p.get("phases", []):
        print(f"  phase {ph['phase']}: {ph['steps']} steps, widths {', '.join(ph['batch_widths'])}")
        for seq in ph.get("micro_batched", []):
            passes = "; ".join(f"[{x['width']}] " + ", ".join(f"{k} x{n}" for k, n in x["kernels"].items()) for x in seq["passes"])
            print(f"    {seq['label']} ({seq['steps']} steps): {passes}")
    for k in p["kernels"]:
        if k.get("ne11"):
            print(f"  ne11 {k['short_name']} {k['class'].get('quant') or ''}: {k['ne11']}")
    print("  counters: " + ", ".join(f"{k} {v}" for k, v in report.get("counters", {}).items() if "module" in k or "unnamed" in k))
