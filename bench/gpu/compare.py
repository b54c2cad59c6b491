"""Compares tracer's per-kernel executions (`tracer report --json`) with CUPTI's (workload.py --mode
oracle), by demangled kernel name. Prints the table; exits 1 when any count differs."""

import json
import subprocess
import sys


def demangle(names):
    """c++filt, the demangler CUDA's tools follow; names that are not mangled come back unchanged."""
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


def main(report_path, oracle_path, process_comm="python3"):
    report = json.load(open(report_path))
    oracle = json.load(open(oracle_path))
    procs = [p for p in report["processes"] if p["kernels"]]
    assert procs, "no process launched a kernel"
    traced = {}
    unnamed = 0
    names = sorted({k["name"] for p in procs for k in p["kernels"] if k["name"]})
    pretty = demangle(names)
    for p in procs:
        for k in p["kernels"]:
            if not k["name"]:
                unnamed += k["executions"]
                continue
            n = pretty.get(k["name"], k["name"])
            traced[n] = traced.get(n, 0) + k["executions"]
    rows = sorted(set(traced) | set(oracle), key=lambda n: (-max(traced.get(n, 0), oracle.get(n, 0)), n))
    bad = 0
    print(f"{'tracer':>7} {'CUPTI':>7}  kernel")
    for n in rows:
        t, o = traced.get(n, 0), oracle.get(n, 0)
        mark = "" if t == o else "   <-- differs"
        bad += t != o
        print(f"{t:>7} {o:>7}  {n[:150]}{mark}")
    print(f"{sum(traced.values()):>7} {sum(oracle.values()):>7}  total ({len(rows)} kernels)")
    replays = sum(p.get("graph_replays", 0) for p in procs)
    unresolved = sum(p.get("graph_replays_unresolved", 0) for p in procs)
    print(f"graph replays seen by tracer: {replays} ({unresolved} unresolved); unnamed executions: {unnamed}")
    print("MATCH: every kernel's count equals CUPTI's" if bad == 0 and unnamed == 0 else f"MISMATCH: {bad} kernels differ")
    return 0 if bad == 0 and unnamed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
