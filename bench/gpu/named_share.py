"""The share of kernel executions a trace names: `python3 named_share.py REPORT.json [FROM_START.json]`
(each `tracer report --json`).

Executions are a kernel's runs (its launches, plus its runs inside graph replays). Prints the share named,
executions by name source, and the unnamed ones by the library whose code launched them. With the report of
the same program traced from its start (every name seen live), checks that each name the late attach gave
is one the program really has; exits 1 if not.
"""

import collections
import json
import sys

report = json.load(open(sys.argv[1]))
truth = None
if len(sys.argv) > 2:
    truth = {k["name"] for p in json.load(open(sys.argv[2]))["processes"] for k in p["kernels"] if k["name"]}
by_source = collections.Counter()
unnamed_by_caller = collections.Counter()
replays = unresolved = 0
for p in report["processes"]:
    replays += p.get("graph_replays", 0) or 0
    unresolved += p.get("graph_replays_unresolved", 0) or 0
    for k in p["kernels"]:
        n = k["executions"]
        by_source[k["source"]] += n
        if k["source"] == "unnamed":
            unnamed_by_caller[(k.get("caller") or "?").rsplit("/", 1)[-1]] += n
total = sum(by_source.values())
named = total - by_source["unnamed"]
print(f"executions {total}, named {named} ({100.0 * named / max(total, 1):.2f} %)")
print(f"graph replays {replays}, of graphs captured before the attach (kernels unknown) {unresolved}")
for p in report["processes"]:
    d = p.get("graph_execs_from_driver")
    if d:
        print(f"  pid {p['pid']}: executables read from the driver {d}")
for source, n in by_source.most_common():
    print(f"  source {source:<16} {n:>10}")
for caller, n in unnamed_by_caller.most_common():
    print(f"  unnamed, launched from {caller:<40} {n:>10}")
if truth is not None:
    late = {k["name"] for p in report["processes"] for k in p["kernels"] if k["name"]}
    wrong = sorted(late - truth)
    print(f"names given late {len(late)}; in the from-start trace's names ({len(truth)}): {len(late) - len(wrong)}")
    for name in wrong[:5]:
        print(f"  NOT in the from-start trace: {name}")
    sys.exit(1 if wrong else 0)
