#!/usr/bin/env python3
"""Writes the PyTorch pipelining CSVs of this folder.

compute_only orders come from `pipestudio-cli generate` (GPipe, 1F1B, interleaved 1F1B,
looped BFS, ZB-V, DualPipe-V; the interleaved zero-bubble order is the interleaved 1F1B one
with each backward split into I and a later W). They are then written the way
torch.distributed.pipelining writes its two forms:

- compute_only: the schedule's pipeline_order. Single-stage schedules (GPipe, 1F1B) carry
  REDUCE_GRAD after each stage's last backward (_add_reduce_grad) and leading idle cells.
- compute_comms: _PipelineScheduleRuntime's lowering of the compute_only order: UNSHARD /
  RESHARD around a window of the next three stages (_add_unshard_reshard), REDUCE_GRAD
  (_add_reduce_grad), then SEND/RECV placed by a lock-step walk over the ranks in which a
  receive is put on the receiving rank when its sender runs (_add_send_recv).

The passes below follow the documented behaviour of those functions; they are written for
this project. Usage: make_csvs.py PIPESTUDIO_CLI OUT_DIR
"""
import os
import subprocess
import sys

COMPUTE = ("F", "I", "W", "B")


def parse_cell(cell):
    cell = cell.strip()
    if not cell:
        return None
    if cell.startswith("("):
        inner, kind = cell[1:].split(")")
        assert kind == "OVERLAP_F_B"
        return ("PAIR", tuple(parse_cell(c) for c in inner.split(";")))
    i = 0
    while cell[i].isdigit():
        i += 1
    j = i
    while j < len(cell) and not cell[j].isdigit():
        j += 1
    mb = int(cell[j:]) if cell[j:] else None
    return (int(cell[:i]), cell[i:j], mb)


def text(a):
    if a is None:
        return ""
    if a[0] == "PAIR":
        return "(" + ";".join(text(x) for x in a[1]) + ")OVERLAP_F_B"
    return f"{a[0]}{a[1]}" + ("" if a[2] is None else str(a[2]))


def leaves(a):
    return a[1] if a[0] == "PAIR" else (a,)


def generate(cli, kind, devices, mbs):
    out = subprocess.run([cli, "generate", kind, "--devices", str(devices), "--microbatches", str(mbs),
                          "-o", "-", "--format", "csv"], check=True, capture_output=True, text=True).stdout
    return [[parse_cell(c) for c in line.split(",") if c.strip()] for line in out.strip("\n").split("\n")]


def split_backward(order):
    """B -> I now and W after the next compute action (an interleaved zero-bubble order)."""
    out = []
    for rank in order:
        row, pending = [], []
        for a in rank:
            split = a[0] != "PAIR" and a[1] == "B"
            row.append((a[0], "I", a[2]) if split else a)
            row.extend(pending)
            pending = [(a[0], "W", a[2])] if split else []
        row.extend(pending)
        out.append(row)
    return out


def add_reduce_grad(actions, mbs):
    out, count = [], {}
    for a in actions:
        if a is None:
            continue
        out.append(a)
        for leaf in leaves(a):
            if leaf[1] in ("W", "B"):
                count[leaf[0]] = count.get(leaf[0], 0) + 1
                if count[leaf[0]] == mbs:
                    out.append((leaf[0], "REDUCE_GRAD", None))
    return out


def add_unshard_reshard(actions, window=3):
    def next_stages(rest):
        seen = []
        for a in rest:
            if a[0] == "PAIR":
                seen += [x[0] for x in a[1] if x[0] not in seen]
                if len(seen) >= window:
                    break
            elif a[0] not in seen:
                seen.append(a[0])
                if len(seen) == window:
                    break
        return seen

    active, out = [], []
    for i, a in enumerate(actions):
        if a is None:
            continue
        upcoming = next_stages([x for x in actions[i:] if x is not None])
        for s in sorted(s for s in active if s not in upcoming):
            active.remove(s)
            out.append((s, "RESHARD", None))
        for s in [s for s in upcoming if s not in active]:
            active.append(s)
            out.append((s, "UNSHARD", None))
        out.append(a)
    for s in list(active):
        out.append((s, "RESHARD", None))
    return out


def add_send_recv(orders, stage_rank, stages):
    def has_comms(a):
        if a[1] == "F":
            return a[0] != stages - 1 and stage_rank[a[0] + 1] != stage_rank[a[0]]
        if a[1] in ("I", "B"):
            return a[0] != 0 and stage_rank[a[0] - 1] != stage_rank[a[0]]
        return False

    def ready(a, done):
        if a[1] == "F" and a[0] != 0:
            return (a[0], "RECV_F", a[2]) in done or (a[0] - 1, "F", a[2]) in done
        if a[1] in ("I", "B") and a[0] != stages - 1:
            return ((a[0], "RECV_B", a[2]) in done or (a[0] + 1, "I", a[2]) in done
                    or (a[0] + 1, "B", a[2]) in done)
        return True

    todo = {r: list(o) for r, o in enumerate(orders) if o}
    out = {r: [] for r in range(len(orders))}
    done = {r: set() for r in range(len(orders))}
    while todo:
        progress = False
        for r in sorted(todo):
            a = todo[r][0]
            if not all(ready(x, done[r]) for x in leaves(a)):
                continue
            out[r].append(a)
            for x in leaves(a):
                done[r].add(x)
                if has_comms(x):
                    fwd = x[1] == "F"
                    send = (x[0], "SEND_F" if fwd else "SEND_B", x[2])
                    recv = (x[0] + 1 if fwd else x[0] - 1, "RECV_F" if fwd else "RECV_B", x[2])
                    out[r].append(send)
                    done[r].add(send)
                    peer = stage_rank[recv[0]]
                    out[peer].append(recv)
                    done[peer].add(recv)
            todo[r].pop(0)
            if not todo[r]:
                del todo[r]
            progress = True
        assert progress, "malformed compute order"
    return [out[r] for r in range(len(orders))]


def write(path, rows):
    with open(path, "w", newline="") as f:
        for row in rows:
            f.write(",".join(text(a) for a in row) + "\r\n")


def main():
    cli, out_dir = sys.argv[1], sys.argv[2]
    cases = [("gpipe", "gpipe", 1), ("1f1b", "1f1b", 1), ("interleaved1f1b", "interleaved-1f1b", 2),
             ("loopedbfs", "looped-bfs", 2), ("interleavedzb", "interleaved-1f1b", 2),
             ("zbvzerobubble", "zb-v", 2), ("dualpipev", "dualpipe-v", 2)]
    for name, kind, chunks in cases:
        sizes = ((2, 4), (4, 8)) + (((2, 2),) if name == "interleaved1f1b" else ())
        for devices, mbs in sizes:
            order = generate(cli, kind, devices, mbs)
            if name == "interleavedzb":
                order = split_backward(order)
            stage_rank = {}
            for r, row in enumerate(order):
                for a in row:
                    for leaf in leaves(a):
                        stage_rank[leaf[0]] = r
            stages = len(stage_rank)
            single = name in ("gpipe", "1f1b")
            # compute_only as pipeline_order holds it: idle cells where a rank waits for its
            # first input (as Schedule1F1B pads), REDUCE_GRAD for the single-stage classes.
            only = []
            for r, row in enumerate(order):
                row = add_reduce_grad(row, mbs) if single else list(row)
                only.append(([None] * r if single else []) + row)
            base = f"{name}_{devices}r_{mbs}mb"
            write(os.path.join(out_dir, base + "_compute_only.csv"), only)
            lowered = [add_reduce_grad(add_unshard_reshard([a for a in row if a is not None and a[1] != "REDUCE_GRAD"]), mbs)
                       for row in only]
            write(os.path.join(out_dir, base + "_compute_comms.csv"), add_send_recv(lowered, stage_rank, stages))


if __name__ == "__main__":
    main()
