#!/usr/bin/env python3
"""A plain Python discrete-event simulator of a PyTorch pipelining CSV (compute_only), the
baseline of docs/benchmarks.md ("simulate of a 131k-op PyTorch CSV").

Same semantics as `pipestudio-cli simulate FILE --cost F=f,I=i,W=w --comm c` (docs/formats.md, "The simulator",
core/src/analysis/simulator.cpp):
- one row per rank (device); each device runs its cells in order, one at a time; an empty
  cell is idle; a stage runs on the rank whose row names it;
- F(s,m) after F(s-1,m); B or I (s,m) after F(s,m) and after B or I of (s+1,m); W(s,m) after
  I(s,m); durations F=f, I=i, W=w, B=i+w (ms);
- a dependency between devices waits for a transfer of c ms on the link from the producer's
  device to the consumer's; each direction is one channel that carries one transfer at a
  time, in the order the data became ready;
- metrics: makespan (first start to last end), per-device busy time and span, bubble ratio
  1 - sum(busy) / (devices x makespan), lower bound max(busy), peak micro-batches in flight
  per device (F started, its B or I not finished).

Usage: python_event_sim.py FILE.csv [--cost F=1,I=1,W=1] [--comm 0.1]
SEND/RECV and other comms cells (compute_comms files) are refused: convert to compute_only.
"""
import argparse
import heapq
import re
import sys

CELL = re.compile(r"^(\d+)([FBIW])(\d+)$")


def parse_costs(text):
    cost = {"F": 1.0, "I": 1.0, "W": 1.0}
    for item in text.split(","):
        k, _, v = item.partition("=")
        if k not in cost:
            sys.exit(f"--cost: unknown kind '{k}' (F, I, W)")
        cost[k] = float(v)
    cost["B"] = cost["I"] + cost["W"]
    return cost


def read_csv(path):
    """Per device: list of (kind, stage, microbatch)."""
    devices = []
    with open(path) as f:
        for row_no, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            ops = []
            for col, cell in enumerate(line.split(","), 1):
                cell = cell.strip()
                if not cell:
                    continue
                m = CELL.match(cell)
                if not m:
                    sys.exit(f"{path}:{row_no}:{col}: unsupported action '{cell}' (compute_only F/B/I/W only)")
                ops.append((m.group(2), int(m.group(1)), int(m.group(3))))
            devices.append(ops)
    return devices


def simulate(devices, cost, comm):
    n_dev = len(devices)
    # Flatten: op id -> (device, kind, stage, mb, duration); where each (kind, stage, mb) lives.
    op_dev, op_kind, op_stage, op_mb, op_dur = [], [], [], [], []
    where = {}
    dev_ops = []
    for d, ops in enumerate(devices):
        ids = []
        for kind, stage, mb in ops:
            i = len(op_dev)
            key = (kind, stage, mb)
            if key in where:
                sys.exit(f"device {d}: {stage}{kind}{mb} appears twice")
            where[key] = i
            op_dev.append(d)
            op_kind.append(kind)
            op_stage.append(stage)
            op_mb.append(mb)
            op_dur.append(cost[kind])
            ids.append(i)
        dev_ops.append(ids)
    n = len(op_dev)

    # Dependencies as successor lists; pending counts.
    succ = [[] for _ in range(n)]
    pending = [0] * n

    def backward_of(stage, mb):
        return where.get(("B", stage, mb), where.get(("I", stage, mb)))

    for i in range(n):
        kind, s, m = op_kind[i], op_stage[i], op_mb[i]
        deps = []
        if kind == "F":
            if s > 0:
                deps.append(where.get(("F", s - 1, m)))
        elif kind in ("B", "I"):
            deps.append(where.get(("F", s, m)))
            nxt = backward_of(s + 1, m)
            if nxt is not None or ("F", s + 1, m) in where:
                deps.append(nxt)
        elif kind == "W":
            deps.append(where.get(("I", s, m)))
        for p in deps:
            if p is None:
                sys.exit(f"device {op_dev[i]}: {s}{kind}{m} depends on an op no device runs")
            succ[p].append(i)
            pending[i] += 1

    ready = [0.0] * n
    start = [0.0] * n
    end = [0.0] * n
    head = [0] * n_dev
    dev_free = [0.0] * n_dev
    busy_dev = [False] * n_dev
    channel = {}
    events = []  # (time, seq, op id): op ends
    seq = 0

    def try_start(d):
        nonlocal seq
        if busy_dev[d] or head[d] >= len(dev_ops[d]):
            return
        i = dev_ops[d][head[d]]
        if pending[i] > 0:
            return
        t = max(dev_free[d], ready[i])
        start[i] = t
        end[i] = t + op_dur[i]
        busy_dev[d] = True
        seq += 1
        heapq.heappush(events, (end[i], seq, i))

    for d in range(n_dev):
        try_start(d)
    finished = 0
    while events:
        t, _, i = heapq.heappop(events)
        finished += 1
        d = op_dev[i]
        busy_dev[d] = False
        dev_free[d] = t
        head[d] += 1
        for c in succ[i]:
            cd = op_dev[c]
            arrival = t
            if cd != d and comm > 0:
                ch = channel.get((d, cd), 0.0)
                ts = t if t > ch else ch
                arrival = channel[(d, cd)] = ts + comm
            if arrival > ready[c]:
                ready[c] = arrival
            pending[c] -= 1
            if pending[c] == 0 and cd != d:
                try_start(cd)
        try_start(d)

    if finished < n:
        stuck = [f"device {d}: {op_stage[dev_ops[d][head[d]]]}{op_kind[dev_ops[d][head[d]]]}{op_mb[dev_ops[d][head[d]]]}"
                 for d in range(n_dev) if head[d] < len(dev_ops[d])]
        sys.exit("deadlock: " + "; ".join(stuck))

    first = min(start[i] for i in range(n)) if n else 0.0
    last = max(end[i] for i in range(n)) if n else 0.0
    makespan = last - first
    per_dev = []
    for d in range(n_dev):
        ids = dev_ops[d]
        busy = sum(op_dur[i] for i in ids)
        span = (end[ids[-1]] - start[ids[0]]) if ids else 0.0
        live = {}
        inflight = peak = 0
        for i in ids:  # in start order: a device runs one op at a time
            if op_kind[i] == "F":
                live[op_mb[i]] = live.get(op_mb[i], 0) + 1
                if live[op_mb[i]] == 1:
                    inflight += 1
                    peak = max(peak, inflight)
            elif op_kind[i] in ("B", "I") and live.get(op_mb[i], 0) > 0:
                live[op_mb[i]] -= 1
                if live[op_mb[i]] == 0:
                    inflight -= 1
        per_dev.append((busy, span, peak))
    total_busy = sum(b for b, _, _ in per_dev)
    bubble = 1.0 - total_busy / (n_dev * makespan) if makespan > 0 else 0.0
    return n, makespan, bubble, max(b for b, _, _ in per_dev), per_dev


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--cost", default="F=1,I=1,W=1")
    ap.add_argument("--comm", type=float, default=0.0)
    a = ap.parse_args()
    devices = read_csv(a.csv)
    n, makespan, bubble, lower, per_dev = simulate(devices, parse_costs(a.cost), a.comm)
    print(f"{a.csv}: {len(devices)} devices, {n} ops")
    print(f"makespan {makespan:.6g} ms   lower bound {lower:.6g} ms   bubble {100 * bubble:.4g}%")
    for d, (busy, span, peak) in enumerate(per_dev):
        print(f"device {d}: busy {busy:.6g} ms, span {span:.6g} ms, peak in flight {peak}")


if __name__ == "__main__":
    main()
