"""The graph executables a trace read from the driver: `python3 graph_execs.py TRACE.jsonl [SHAPE...]`.

One line per `graph_exec` record: the shape it was made from (when given, in order), the route, the outcome,
the records listed, whether its check agreed, and the kernels read by name (with their name source). Exits 1
when a check disagreed or fewer records than shapes were written.
"""

import collections
import json
import sys

recs = [json.loads(line) for line in open(sys.argv[1])]
names = {r["id"]: (r["name"] or "(unnamed)")[:48] + " [" + r["source"] + "]" for r in recs if r["type"] == "kernel"}
shapes = sys.argv[2:]
reads = [r for r in recs if r["type"] == "graph_exec"]
bad = 0
for i, r in enumerate(reads):
    shape = shapes[i] if i < len(shapes) else "-"
    ks = [names.get(k, "?") for k in r.get("kernels", [])]
    print(
        f"  {shape:9} route {r.get('route')} {r['outcome']} records {r['nodes']} agrees {r.get('agrees')}"
        f" kernels {len(ks)}: {dict(collections.Counter(ks).most_common(4))}"
    )
    bad += r.get("check", False) and r.get("agrees") is not True
foot = recs[-1].get("counters", {})
print("  footer:", {k: v for k, v in foot.items() if k.startswith("graph_")})
sys.exit(1 if bad or len(reads) < len(shapes) else 0)
