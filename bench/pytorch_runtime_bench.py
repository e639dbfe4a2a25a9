#!/usr/bin/env python3
"""PipeStudio's searched schedule against PyTorch's own schedule classes, both run by PyTorch.

For each case (a model, D ranks, M micro-batches), on Gloo CPU ranks of this machine:

1. profile: every layer of the model, alone in this process on one micro-batch (1 thread):
   forward, input-gradient and weight-gradient times (lower quartiles), the bytes autograd saves, weight
   and output bytes; the Gloo link by a ping-pong between two ranks (latency and bandwidth);
   written as a PipeStudio cost profile;
2. search: `pipestudio-cli search --profile ... --no-recompute --no-offload --no-routes --json -o best.pipe`
   (PyTorch's CSV has no recompute or offload action), then `convert best.pipe best.csv`
   (compute_only: PyTorch lowers it itself, as torchtitan has it do);
3. run, each in PyTorch's runtime (tests/pytorch/pp_harness.py) on the same model, data and
   ranks: the searched CSV with its partition; every PyTorch class that takes the case (GPipe,
   1F1B, InterleavedZeroBubble with 1 and 2 stages per rank, Interleaved1F1B, LoopedBFS,
   ZBVZeroBubble, DualPipeV), each with two partitions of the layers into its stages: equal
   layer counts, and the compute-balanced split of the same profile (contiguous, minimal
   slowest stage). Each run: one checked step (loss and gradients against one process), warm-up
   steps, timed steps (a step's time is its slowest rank's, from a common barrier), and one
   step under torch.profiler for the peak bytes allocated during the step (the largest rank's).
   All of a case's runs share one process group and go round `--rounds` times in turn, so that
   the load of a shared machine falls on all alike; the median is over every timed step.

Prints a table per case and writes the figures as JSON (--json). The best built-in is the
fastest median step over classes and partitions. Usage (in the project's PyTorch environment):

  python bench/pytorch_runtime_bench.py --cli build/app/pipestudio-cli [--cases NAME,...]
      [--steps 5] [--rounds 3] [--json out.json]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pytorch"))
import pp_harness  # noqa: E402

# name -> (ranks, micro-batches, model, layers, micro-batch size)
CASES = {
    # An LM-like model: 8 MLP blocks and a heavy output layer (a 16k-way head).
    "lmhead_d2_m8": (2, 8, {"kind": "mlp", "hidden": 256, "vocab": 16384}, 9, 32),
    "lmhead_d2_m4": (2, 4, {"kind": "mlp", "hidden": 256, "vocab": 16384}, 9, 32),
    # Uniform blocks (a small head): little for a partition to balance.
    "uniform_d2_m8": (2, 8, {"kind": "mlp", "hidden": 256, "vocab": 256}, 9, 32),
    # Four ranks on the two cores: oversubscribed, times include the ranks' contention.
    "lmhead_d4_m8": (4, 8, {"kind": "mlp", "hidden": 256, "vocab": 16384}, 13, 32),
}

# PyTorch's classes, the stages per rank each is run with, and the generator kind that gives the
# same order (tests/core/pytorch_orders_test.cpp), which the cost model simulates.
BUILTINS = [("GPipe", 1, "gpipe"), ("1F1B", 1, "1f1b"), ("InterleavedZeroBubble", 1, "zb-h1"),
            ("Interleaved1F1B", 2, "interleaved-1f1b"), ("LoopedBFS", 2, "looped-bfs"),
            ("InterleavedZeroBubble", 2, "zb-h1"), ("ZBVZeroBubble", 2, "zb-v"), ("DualPipeV", 2, "dualpipe-v")]


def profile_layers(model, layers, mb_size, reps=21):
    import torch
    import torch.nn as nn

    torch.set_num_threads(1)
    blocks = pp_harness._blocks(model, layers, torch, nn)
    x, y = pp_harness._batch(model, 1, mb_size, torch)
    loss_fn = pp_harness._loss(model, "mean", mb_size, torch)
    out = []

    def median_ms(fn):
        # The lower quartile: on a shared machine the noise only ever adds time.
        for _ in range(3):
            fn()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000.0)
        return sorted(times)[len(times) // 4]

    inp = x
    for i, b in enumerate(blocks):
        inp = inp.detach().requires_grad_(True)
        params = list(b.parameters())
        last = i == len(blocks) - 1
        saved = []

        def pack(t):
            saved.append(t.numel() * t.element_size())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            o = b(inp)
        head = (lambda o: loss_fn(o, y)) if last else (lambda o: o)
        grad_out = None if last else torch.randn_like(o)
        f_ms = median_ms(lambda: head(b(inp)))

        def input_grad():
            r = head(b(inp))
            torch.autograd.grad(r, [inp], grad_out)

        def weight_grad():
            r = head(b(inp))
            torch.autograd.grad(r, params, grad_out)

        def both():
            r = head(b(inp))
            torch.autograd.grad(r, [inp] + params, grad_out)

        # Each backward timed with its forward, the forward taken off; W alone is what `both`
        # takes beyond I.
        i_ms = max(median_ms(input_grad) - f_ms, 0.0)
        b_ms = max(median_ms(both) - f_ms, 0.0)
        w_ms = max(b_ms - i_ms, 0.0)
        weight_bytes = sum(p.numel() * p.element_size() for p in params)
        out.append({"name": "head" if last and model.get("vocab") else f"block{i}", "forward_ms": round(f_ms, 4),
                    "backward_input_ms": round(i_ms, 4), "backward_weight_ms": round(w_ms, 4),
                    "activation_bytes": int(sum(saved)), "weight_bytes": int(weight_bytes),
                    "output_bytes": int(o.numel() * o.element_size())})
        inp = o.detach()
    return out


def probe_link(work, sizes):
    res = pp_harness.run_cases(2, [{"id": "probe", "probe": sizes, "repeats": 40}], os.path.join(work, "probe"))
    t = res["probe"][0]["one_way_ms"]
    small, big = t[str(sizes[0])], t[str(sizes[1])]
    bw = (sizes[1] - sizes[0]) / max(big - small, 1e-6)  # bytes per ms
    return {"latency_ms": round(small, 4), "bandwidth_bytes_per_ms": int(bw)}


def balanced_split(times, stages):
    """Contiguous split of `times` into `stages` parts with the smallest largest sum."""
    n = len(times)
    pre = [0.0]
    for t in times:
        pre.append(pre[-1] + t)
    INF = float("inf")
    best = [[INF] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for j in range(k, n - (stages - k) + 1):
            for i in range(k - 1, j):
                v = max(best[k - 1][i], pre[j] - pre[i])
                if v < best[k][j]:
                    best[k][j], cut[k][j] = v, i
    parts, j = [], n
    for k in range(stages, 0, -1):
        i = cut[k][j]
        parts.append(j - i)
        j = i
    return parts[::-1]


def even_split(n, stages):
    return [n // stages + (1 if s < n % stages else 0) for s in range(stages)]


def header_partition(pipe):
    for line in open(pipe):
        if line.startswith("partition "):
            return [int(x) for x in line.split(None, 1)[1].replace(",", " ").split()]
    return None


def run_case(name, cli, work, steps, warmup, rounds):
    D, M, model, layers, mb_size = CASES[name]
    case_dir = os.path.join(work, name)
    os.makedirs(case_dir, exist_ok=True)
    prof_layers = profile_layers(model, layers, mb_size)
    out_bytes = max(l["output_bytes"] for l in prof_layers)
    link = probe_link(case_dir, [4, out_bytes])
    profile = {"name": name, "layers": prof_layers, "device": {"memory_bytes": 0}, "link": link}
    prof_path = os.path.join(case_dir, "profile.json")
    with open(prof_path, "w") as f:
        json.dump(profile, f, indent=1)
    pipe = os.path.join(case_dir, "best.pipe")
    search = json.loads(subprocess.run(
        [cli, "search", "--profile", prof_path, "--devices", str(D), "--microbatches", str(M), "--no-recompute",
         "--no-offload", "--no-routes", "--json", "-o", pipe], check=True, capture_output=True, text=True).stdout)
    csv = os.path.join(case_dir, "best.csv")
    subprocess.run([cli, "convert", pipe, csv], check=True, capture_output=True)
    partition = header_partition(pipe)
    times = [l["forward_ms"] + l["backward_input_ms"] + l["backward_weight_ms"] for l in prof_layers]

    common = {"model": model, "microbatch_size": mb_size, "time_steps": steps, "warmup": warmup, "memory": True}
    cases = [dict(common, id="searched", csv=csv, format="compute_only", partition=partition)]
    predicted = {"searched": search.get("best", {}).get("makespan_ms")}
    for cls, spr, kind in BUILTINS:
        S = D * spr
        if S > layers:
            continue
        gen = os.path.join(case_dir, f"{kind}_v{spr}.pipe")
        made = subprocess.run([cli, "generate", kind, "--devices", str(D), "--microbatches", str(M), "--chunks",
                               str(spr), "-o", gen], capture_output=True)
        for pname, part in (("even", even_split(layers, S)), ("balanced", balanced_split(times, S))):
            cid = f"{cls}/spr{spr}/{pname}"
            cases.append(dict(common, id=cid, builtin={"class": cls, "stages_per_rank": spr}, microbatches=M,
                              partition=part))
            if made.returncode == 0:
                sim = subprocess.run([cli, "simulate", gen, "--profile", prof_path, "--partition",
                                      ",".join(map(str, part)), "--json"], capture_output=True, text=True)
                if sim.stdout.strip():
                    predicted[cid] = json.loads(sim.stdout).get("makespan")
    # One process group runs every configuration, `rounds` times in turn, so that a change of the
    # machine's load falls on all of them alike; a class that refuses the case says so and the
    # ranks go on.
    runs = [dict(c, id=f"{c['id']}#{k}", refusal_ok=True) for k in range(rounds) for c in cases]
    results = pp_harness.run_cases(D, runs, os.path.join(case_dir, "runs"), timeout_s=3000)
    rows = []
    for c in cases:
        per_round = [results[f"{c['id']}#{k}"] for k in range(rounds)]
        if any("refused" in rank for rank in per_round[0]):
            rows.append({"id": c["id"], "partition": c.get("partition"), "predicted_ms": predicted.get(c["id"]),
                         "refused": per_round[0][0]["refused"]})
            continue
        per_step = [max(rank["step_ms"][i] for rank in r) for r in per_round for i in range(steps)]
        # The ranks' CPU time over the step's wall time: near the rank count when the ranks
        # really ran at once, near 1 when they took turns on the cores.
        overlap = [sum(rank["cpu_ms"][i] for rank in r) / max(rank["step_ms"][i] for rank in r)
                   for r in per_round for i in range(steps)]
        checks = [pp_harness.summary(r) for r in per_round]
        exact = all(s["max_grad_err"] <= 1e-4 and abs(s["loss"] - s["ref_loss"]) <= 1e-4 * abs(s["ref_loss"])
                    for s in checks)
        rows.append({"id": c["id"], "partition": c["partition"], "predicted_ms": predicted.get(c["id"]),
                     "median_ms": statistics.median(per_step), "min_ms": min(per_step), "max_ms": max(per_step),
                     "cpu_per_wall": statistics.median(overlap),
                     "peak_bytes": max(rank.get("peak_bytes", 0) for r in per_round for rank in r),
                     "exact": exact, "max_grad_err": max(s["max_grad_err"] for s in checks)})
    return {"case": name, "ranks": D, "microbatches": M, "model": model, "layers": layers,
            "microbatch_size": mb_size, "link": link, "search": {
                "best": search.get("best", {}).get("name"), "predicted_ms": search.get("best", {}).get("makespan_ms"),
                "builtins": {b.get("name"): b.get("makespan_ms") for b in search.get("builtins", [])}},
            "partition": partition, "rows": rows}


def report(res):
    rows = res["rows"]
    ok = [r for r in rows if "median_ms" in r]
    searched = next(r for r in rows if r["id"] == "searched")
    builtins = [r for r in ok if r["id"] != "searched"]
    even = [r for r in builtins if r["id"].endswith("/even")]
    print(f"\n== {res['case']}: {res['ranks']} ranks, {res['microbatches']} micro-batches of "
          f"{res['microbatch_size']}, {res['layers']} layers {res['model']}")
    print(f"   load average {res['load_average'][0]} at the start, {res['load_average'][1]} at the end")
    print(f"   link {res['link']}; search: {res['search']['best']} partition {res['partition']}")
    print(f"   {'run':38s} {'partition':24s} {'pred ms':>8s} {'median':>8s} {'min':>8s} {'max':>8s} {'cpu/wall':>8s}"
          f" {'peak MB':>8s} exact")
    for r in rows:
        pred = f"{r['predicted_ms']:8.1f}" if r.get("predicted_ms") else f"{'-':>8s}"
        if "median_ms" not in r:
            print(f"   {r['id']:38s} {str(r['partition']):24s} {pred} refused: {r['refused']}")
            continue
        print(f"   {r['id']:38s} {str(r['partition']):24s} {pred} {r['median_ms']:8.1f} {r['min_ms']:8.1f} "
              f"{r['max_ms']:8.1f} {r['cpu_per_wall']:8.2f} {r['peak_bytes'] / 2**20:8.1f} "
              f"{'yes' if r['exact'] else 'NO'}")
    summary = {}
    for label, pool in (("best built-in, even split", even), ("best built-in, any split", builtins)):
        if not pool or "median_ms" not in searched:
            continue
        by_median = min(pool, key=lambda r: r["median_ms"])
        by_pred = min((r for r in pool if r.get("predicted_ms")), key=lambda r: r["predicted_ms"], default=None)
        line = {"measured_best": by_median["id"], "measured_speedup": by_median["median_ms"] / searched["median_ms"],
                "measured_speedup_min": min(r["min_ms"] for r in pool) / searched["min_ms"]}
        if by_pred and searched.get("predicted_ms"):
            line.update(predicted_best=by_pred["id"], predicted_speedup=by_pred["predicted_ms"] / searched["predicted_ms"])
        summary[label] = line
        print(f"   searched vs {label}: predicted {line.get('predicted_speedup', float('nan')):.3f}x "
              f"({line.get('predicted_best')}), measured median {line['measured_speedup']:.3f}x ({line['measured_best']}), "
              f"measured min {line['measured_speedup_min']:.3f}x  (>1: searched faster)")
    res["summary"] = summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "build", "app", "pipestudio-cli"))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--steps", type=int, default=5, help="timed steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--nice", type=int, default=0,
                    help="nice value of the ranks (e.g. -10 on a shared machine; negative needs root)")
    ap.add_argument("--json")
    ap.add_argument("--work")
    args = ap.parse_args()
    import torch

    if args.nice:
        # This process and the ranks it starts (they inherit it) run ahead of the machine's
        # other work: on a shared machine the ranks otherwise take turns on the cores.
        os.nice(args.nice)

    work = args.work or tempfile.mkdtemp(prefix="ps_bench_")
    out = {"date": datetime.date.today().isoformat(), "torch": torch.__version__, "python": platform.python_version(),
           "machine": f"{platform.system()} {platform.release()}, {os.cpu_count()} cores", "command": " ".join(sys.argv),
           "nice": args.nice,
           "cases": []}
    for name in args.cases.split(","):
        load = os.getloadavg()
        res = run_case(name, os.path.abspath(args.cli), work, args.steps, args.warmup, args.rounds)
        res["load_average"] = [round(load[0], 2), round(os.getloadavg()[0], 2)]
        report(res)
        out["cases"].append(res)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
