#!/usr/bin/env python3
"""Writes a large torch.profiler trace by repeating a real one (docs/benchmarks.md, "Trace import").

The events of SOURCE (a rank's trace, plain or .json.gz, e.g. one of
tests/data/traces/torch-2.11.0/) are written again and again, each copy shifted past the
previous one in time, until the output holds at least SIZE bytes of JSON; everything outside
`traceEvents` is kept once. Each copy is one more training step of the same run, so the result
imports as a trace of that many iterations. The output is written as it goes (gzip when OUT ends
in .gz), so making a 4 GB file takes no more memory than the source.

Usage: make_big_trace.py SOURCE OUT SIZE      SIZE in bytes, or with a suffix: 500M, 4G
"""
import gzip
import json
import sys


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def main(source, out, size):
    opener = gzip.open if source.endswith(".gz") else open
    with opener(source, "rt") as f:
        top = json.load(f)
    events = top.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M"]
    first = min(e["ts"] for e in timed)
    last = max(e["ts"] + e.get("dur", 0) for e in timed)
    period = (last - first) * 1.1 + 1000.0  # the copies one after another, with a gap
    meta = [json.dumps(e) for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    # The text of one copy with its times as a placeholder offset, written per copy.
    head = json.dumps(top)[:-1]  # without the closing brace
    written = 0
    writer = gzip.open(out, "wt", compresslevel=6) if out.endswith(".gz") else open(out, "w")
    with writer as w:
        w.write(head + (", " if top else "") + '"traceEvents": [\n')
        w.write(",\n".join(meta))
        copies = 0
        while written < size:
            shift = copies * period
            chunk = []
            for e in body:
                if "ts" in e and isinstance(e["ts"], (int, float)):
                    e = dict(e)
                    e["ts"] = round(e["ts"] + shift, 3)
                chunk.append(json.dumps(e))
            text = ",\n" + ",\n".join(chunk)
            w.write(text)
            written += len(text)
            copies += 1
        w.write("\n]}\n")
    print(f"{out}: {copies} copies of {source}, {written / 2**20:.1f} MiB of events")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2], parse_size(sys.argv[3]))
