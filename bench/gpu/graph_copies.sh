#!/usr/bin/env bash
# Issue 28, the second route (an executable whose source graph is destroyed, PyTorch's default): graphs of
# several shapes captured by graph_shapes.py, recorded from the start, so that tracer reads each process's
# first four executables through their node copies and checks them against what it saw captured (strict:
# the kernels read must be the capture's, as many times, and nothing else). Prints each check: the shape,
# the records listed, whether it agreed. Then graph_late.sh's PyTorch loops (late attach, both modes).
#   bench/gpu/graph_copies.sh [TRACER_BINARY]      (LATE=0: the shapes alone)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
status=0
i=0
for shapes in "lin:1 lin:2 lin:3 lin:5" "lin:16 lin:64 lin:129 lin:500" "fork copy:1 copy:8 lin:2000"; do
  i=$((i + 1))
  echo "== graphs $shapes"
  "$tracer" record -q --force -o "$out/shapes-$i.jsonl" -- python3 "$here/graph_shapes.py" $shapes > "$out/shapes-$i.out" 2>&1 || status=1
  tail -4 "$out/shapes-$i.out"
  python3 "$here/graph_execs.py" "$out/shapes-$i.jsonl" $shapes || status=1
done
[ "${LATE:-1}" = 0 ] || "$here/graph_late.sh" "$tracer" || status=1
exit $status
