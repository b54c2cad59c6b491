#!/usr/bin/env python3
"""Issue 28's evidence, before tracer reads graph executables itself: for each CUgraphExec a late trace saw
replayed without its capture, read the driver's objects in the live process through /proc/PID/mem with the
chain bench/gpu/graphexec_layout.md found (driver 580.159.04):
    O = *(E+0x50); n = u32 @ O+0x1c; records @ *(O+0x10), stride 0x28; node = *(rec+0x10);
    type = u32 @ node+4 (0 = kernel); F = *(node+0x20); name = C string @ *(F+8)
and compare the names with those of a from-start trace of the same command. Every read is bounded; a bad
pointer fails the read, never the process.
    graphexec_read.py PID LATE_TRACE.jsonl START_REPORT.json
"""
import json
import struct
import sys

MAX_NODES = 100_000


def main():
    pid, late, start_report = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    execs = {}
    with open(late) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "call" and r.get("api") == "cuGraphLaunch" and r.get("handle"):
                execs[r["handle"]] = execs.get(r["handle"], 0) + 1
    start = json.load(open(start_report))
    truth = set()
    for p in start["processes"]:
        for k in p.get("kernels", []):
            truth.add(k["name"])
    mem = open(f"/proc/{pid}/mem", "rb", buffering=0)

    def read(addr, n):
        try:
            mem.seek(addr)
            b = mem.read(n)
            return b if len(b) == n else None
        except (OSError, ValueError, OverflowError):
            return None

    def u64(addr):
        b = read(addr, 8)
        return struct.unpack("<Q", b)[0] if b else None

    def u32(addr):
        b = read(addr, 4)
        return struct.unpack("<I", b)[0] if b else None

    def cstr(addr):
        b = read(addr, 512) if addr else None
        if b is None:
            # The string may end before a page boundary: read shorter.
            for n in (256, 128, 64):
                b = read(addr, n)
                if b:
                    break
        if not b or b"\0" not in b:
            return None
        return b.split(b"\0", 1)[0].decode("ascii", "replace")

    total_replays = sum(execs.values())
    named_exec = 0
    executions = named_executions = in_truth = 0
    for e, replays in sorted(execs.items(), key=lambda x: -x[1]):
        o = u64(e + 0x50)
        n = u32(o + 0x1C) if o else None
        recs = u64(o + 0x10) if o else None
        names = []
        if n is not None and recs and 0 < n <= MAX_NODES:
            for i in range(n):
                node = u64(recs + i * 0x28 + 0x10)
                if not node or u32(node + 4) != 0:
                    continue
                f = u64(node + 0x20)
                name = cstr(u64(f + 8)) if f else None
                names.append(name)
        ok = [x for x in names if x]
        known = [x for x in ok if x in truth]
        print(f"exec {e:#x}: {replays} replays, {n} nodes, {len(names)} kernel nodes, {len(ok)} named, "
              f"{len(known)} of them among the from-start trace's names")
        if ok:
            named_exec += replays
        executions += replays * len(names)
        named_executions += replays * len(ok)
        in_truth += replays * len(known)
        for x in sorted(set(ok) - truth)[:5]:
            print(f"   not in the from-start trace: {x[:120]}")
    print(f"replays {total_replays}; of executables read {named_exec}; kernel executions {executions}, "
          f"named {named_executions} ({100.0 * named_executions / max(executions, 1):.1f} %), "
          f"among the from-start names {in_truth} ({100.0 * in_truth / max(executions, 1):.1f} %)")


if __name__ == "__main__":
    main()
