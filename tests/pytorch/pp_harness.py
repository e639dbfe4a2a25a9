"""Runs pipeline schedules in PyTorch's own pipelining runtime, on Gloo CPU ranks, and checks
the result against the same model trained in one process.

One process group per call: `run_cases(world, cases, workdir)` starts `world` worker processes
(this file, `worker` mode) that rendezvous through a file store (no port to pick) on loopback
Gloo, and every rank runs every case in turn, the way a training job would:

- the model (`model` in the case): by default `layers` seeded Linear(16, 16) + Tanh blocks
  (every third block also has a LayerNorm), f32; or {"kind": "mlp", "hidden": H, "vocab": V}:
  pre-norm MLP blocks and an LM-head-like last layer (the benchmark's). Split into S stages
  (`partition` gives layers per stage, default one each); every rank builds the whole model
  from the seed and keeps its stages;
- each stage is a `torch.distributed.pipelining.PipelineStage`; the schedule is either
  `_PipelineScheduleRuntime` filled by `_load_csv(csv, format)` (S = the CSV's stage count), or
  one of PyTorch's classes run by itself (`builtin`: class and stages per rank);
- which stages a rank builds: from the CSV itself (`stages: "csv"`, the rows are the ranks), or
  as torchtitan builds them from its `pipeline_parallel_schedule` (`stages: "loop"` or `"v"`:
  `_get_pp_rank_to_stage_indices_mapping`'s two styles; a `builtin` class always so);
- one `step()` on the whole batch (micro-batches of `microbatch_size`, default 2 samples), then
  the loss the runtime reports (mean of the micro-batch losses for `loss: "mean"`, their sum for
  `loss: "global"`, a sum-reduced loss divided by the whole batch's size, as torchtitan
  normalises by the global token count) and every parameter gradient are compared with one
  process running the unsplit model on the whole batch (mean-reduced loss).

Each rank reports, per case, its largest gradient error relative to the tensor's largest
reference value, the ratio of gradient norms, the loss (on the rank that holds the last stage),
and on request step times and CPU times (`time_steps`), the step's peak allocated bytes
(`memory`: torch.profiler's memory events) and a Chrome trace of one profiled step
(`trace_dir`), or gzipped traces where torchtitan, Megatron-LM or tensorboard_trace_handler put
them (`trace_layout`, `trace_steps`), with pipestudio.trace_ranges on (`trace_ranges`). The caller decides what is right. A `builtin` class that refuses the case (its
own micro-batch rules) is reported as refused when the case says `refusal_ok`; any other error
stops the rank and the run. A case with `probe` (sizes in bytes) times a ping-pong between
ranks 0 and 1 instead.

Only processes this module starts are ever killed, by their own handles.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

HIDDEN = 16
MICROBATCH_SIZE = 2
SEED = 20261127
RANK_TIMEOUT_S = 90  # a Gloo wait (p2p, barrier) that takes longer fails the rank


# ------------------------------------------------------------------------------------------
# The parent side


def run_cases(world, cases, workdir, timeout_s=300, env=None):
    """Runs every case on `world` ranks; returns {case id: [per-rank result, ...]}.
    Raises RuntimeError naming the failing rank and its output when a rank fails or the run
    exceeds `timeout_s`."""
    os.makedirs(workdir, exist_ok=True)
    cases_path = os.path.join(workdir, f"cases_w{world}.json")
    with open(cases_path, "w") as f:
        json.dump(cases, f)
    store = os.path.join(workdir, f"store_w{world}")
    if os.path.exists(store):
        os.remove(store)
    child_env = dict(os.environ)
    child_env.update({"OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "MKL_NUM_THREADS": "1"})
    if env:
        child_env.update(env)
    procs, outs, logs = [], [], []
    try:
        for rank in range(world):
            out = os.path.join(workdir, f"results_w{world}_r{rank}.json")
            log = open(os.path.join(workdir, f"log_w{world}_r{rank}.txt"), "w")
            if os.path.exists(out):
                os.remove(out)
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "worker", str(rank), str(world), store,
                 cases_path, out],
                stdout=log, stderr=subprocess.STDOUT, env=child_env))
            outs.append(out)
            logs.append(log)
        deadline = time.monotonic() + timeout_s
        failed = None
        while any(p.poll() is None for p in procs):
            bad = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
            if bad:
                failed = bad[0]
                break
            if time.monotonic() > deadline:
                failed = "timeout"
                break
            time.sleep(0.05)
        if failed is None:
            bad = [r for r, p in enumerate(procs) if p.returncode != 0]
            failed = bad[0] if bad else None
        if failed is not None:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for p in procs:
                p.wait()
            for log in logs:
                log.flush()
            which = (f"the run exceeded {timeout_s} s" if failed == "timeout" else
                     f"rank {failed} exited with status {procs[failed].returncode}")
            tails = []
            for r in range(world):
                with open(os.path.join(workdir, f"log_w{world}_r{r}.txt")) as f:
                    tails.append(f"--- rank {r} ---\n" + f.read()[-4000:])
            raise RuntimeError(f"{world} ranks: {which}\n" + "\n".join(tails))
    finally:
        stop_processes(procs, logs)
    results = {}
    for out in outs:
        with open(out) as f:
            for r in json.load(f):
                results.setdefault(r["id"], []).append(r)
    for rs in results.values():
        rs.sort(key=lambda r: r["rank"])
    return results


def stop_processes(procs, logs):
    """Kills those of `procs` (started here) still running, waits for them and closes `logs`."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    for log in logs:
        log.close()


def summary(rank_results):
    """One case's per-rank results folded: max gradient error, gradient norm ratio, loss, and
    the reference loss."""
    errs = [r["max_grad_err"] for r in rank_results]
    num = sum(r["grad_sq"] for r in rank_results)
    den = sum(r["ref_grad_sq"] for r in rank_results)
    loss = [r["loss"] for r in rank_results if r["loss"] is not None]
    return {
        "max_grad_err": max(errs),
        "grad_norm_ratio": (num / den) ** 0.5 if den > 0 else float("nan"),
        "loss": loss[0] if loss else None,
        "ref_loss": rank_results[0]["ref_loss"],
        "params": sum(r["params"] for r in rank_results),
    }


def read_rows(path):
    with open(path, newline="") as f:
        return [row for row in csv.reader(f)]


# ------------------------------------------------------------------------------------------
# The rank side


def _blocks(model, n_layers, torch, nn):
    """The model's layers, one module each, from the seed. `model`: {} for the test model
    (Linear(16, 16) + Tanh blocks, a LayerNorm in every third), or {"kind": "mlp", "hidden": H,
    "vocab": V}: pre-norm MLP blocks (LayerNorm, Linear(H, 4H), GELU, Linear(4H, H)) and, when V
    is set, a last layer LayerNorm + Linear(H, V) (an LM head: heavy for a large V)."""
    torch.manual_seed(SEED)
    blocks = []
    if model.get("kind", "tiny") == "tiny":
        for i in range(n_layers):
            layers = [nn.Linear(HIDDEN, HIDDEN)]
            if i % 3 == 2:
                layers.append(nn.LayerNorm(HIDDEN))
            layers.append(nn.Tanh())
            blocks.append(nn.Sequential(*layers))
        return blocks
    h, vocab = model["hidden"], model.get("vocab", 0)
    for _ in range(n_layers - (1 if vocab else 0)):
        blocks.append(nn.Sequential(nn.LayerNorm(h), nn.Linear(h, 4 * h), nn.GELU(), nn.Linear(4 * h, h)))
    if vocab:
        blocks.append(nn.Sequential(nn.LayerNorm(h), nn.Linear(h, vocab)))
    return blocks


def _batch(model, microbatches, microbatch_size, torch):
    g = torch.Generator().manual_seed(SEED + 1)
    n = microbatches * microbatch_size
    h = model.get("hidden", HIDDEN)
    x = torch.randn(n, h, generator=g)
    if model.get("vocab"):
        y = torch.randint(0, model["vocab"], (n,), generator=g)
    else:
        y = torch.randn(n, h, generator=g)
    return x, y


def _loss(model, kind, batch, torch):
    """The per-micro-batch loss: mean-reduced ("mean"), or sum-reduced over the whole batch's
    size ("global", as torchtitan normalises by the global token count)."""
    F = torch.nn.functional
    vocab = model.get("vocab")
    elems = batch if vocab else batch * model.get("hidden", HIDDEN)
    if kind == "mean":
        return (lambda out, tgt: F.cross_entropy(out, tgt)) if vocab else (lambda out, tgt: F.mse_loss(out, tgt))
    if vocab:
        return lambda out, tgt: F.cross_entropy(out, tgt, reduction="sum") / elems
    return lambda out, tgt: F.mse_loss(out, tgt, reduction="sum") / elems


_reference_cache = {}


def _reference(model, n_layers, microbatches, microbatch_size, torch, nn):
    """Loss and per-block parameter gradients of the unsplit model on the whole batch."""
    key = (json.dumps(model, sort_keys=True), n_layers, microbatches, microbatch_size)
    if key not in _reference_cache:
        blocks = _blocks(model, n_layers, torch, nn)
        whole = nn.Sequential(*blocks)
        x, y = _batch(model, microbatches, microbatch_size, torch)
        loss = _loss(model, "mean", len(x), torch)(whole(x), y)
        loss.backward()
        grads = [{n: p.grad.detach().clone() for n, p in b.named_parameters()} for b in blocks]
        _reference_cache[key] = (loss.item(), grads)
    return _reference_cache[key]


def _parse_actions(rows, S):
    actions = {}
    for rank, row in enumerate(rows):
        actions[rank] = [S._Action.from_str(c) for c in row]
    return actions


def _shape(actions):
    """Stages and micro-batches a CSV's actions name."""
    stages, mbs = 0, 0

    def visit(a):
        nonlocal stages, mbs
        if a.sub_actions is not None:
            for s in a.sub_actions:
                visit(s)
            return
        stages = max(stages, a.stage_index + 1)
        if a.microbatch_index is not None:
            mbs = max(mbs, a.microbatch_index + 1)

    for row in actions.values():
        for a in row:
            if a is not None:
                visit(a)
    return stages, mbs


def _torchtitan_stage_indices(rank, world, style, num_stages):
    """The stages torchtitan builds on a rank for a schedule class of `style` ("loop" or "v"),
    as its _get_pp_rank_to_stage_indices_mapping does."""
    per_rank = num_stages // world
    if num_stages % world:
        raise ValueError(f"{num_stages} stages do not divide over {world} ranks")
    if style == "loop":
        return [rank + k * world for k in range(per_rank)]
    if per_rank != 2:
        raise ValueError(f"v-style placement needs 2 stages per rank, not {per_rank}")
    return [rank, num_stages - 1 - rank]


def _peak_from_trace(path):
    """The step's peak allocated bytes from torch.profiler's [memory] events: the largest
    'Total Allocated' less the total before the step's first allocation. On the CPU that total
    only counts blocks the profiler saw allocated (a block allocated earlier is not taken off
    when freed), so the figure is the peak of what the step itself allocates: activations,
    gradients, communication buffers."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    mem = [e["args"] for e in events if e.get("name") == "[memory]" and "Total Allocated" in e.get("args", {})]
    if not mem:
        return 0
    base = mem[0]["Total Allocated"] - mem[0].get("Bytes", 0)
    return max(m["Total Allocated"] for m in mem) - base


def _probe_link(case, rank, world, torch, dist):
    """Rank 0 and rank 1 bounce tensors of each size in `case["probe"]` (bytes); the result is
    the median one-way time per size, in ms."""
    out = {"id": case["id"], "rank": rank, "one_way_ms": {}}
    for size in case["probe"]:
        buf = torch.zeros(max(1, size // 4))
        times = []
        for i in range(case.get("repeats", 30) + 3):
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            elif rank == 1:
                dist.recv(buf, 0)
                dist.send(buf, 0)
            if i >= 3:
                times.append((time.perf_counter() - t0) * 1000.0 / 2)
        times.sort()
        out["one_way_ms"][str(size)] = times[len(times) // 2]
    return out


def _builtin_stage_indices(rank, world, cls_name, stages_per_rank, S):
    """Stages a rank builds for PyTorch's own class: V-shape for ZBVZeroBubble and DualPipeV,
    else the loop (as torchtitan builds them)."""
    cls = S.get_schedule_class(cls_name)
    style = "v" if cls in (S.ScheduleZBVZeroBubble, S.ScheduleDualPipeV) else "loop"
    return _torchtitan_stage_indices(rank, world, style, world * stages_per_rank), cls


def run_case(case, rank, world, torch, dist, S, nn, PipelineStage):
    if case.get("probe"):
        return _probe_link(case, rank, world, torch, dist)
    model = case.get("model", {})
    mb_size = case.get("microbatch_size", MICROBATCH_SIZE)
    builtin = case.get("builtin")
    if builtin:
        # One of PyTorch's schedule classes, run by itself (no CSV).
        n_stages = world * builtin["stages_per_rank"]
        M = case["microbatches"]
        mine, _ = _builtin_stage_indices(rank, world, builtin["class"], builtin["stages_per_rank"], S)
    else:
        rows = read_rows(case["csv"])
        actions = _parse_actions(rows, S)
        n_stages, n_mb = _shape(actions)
        M = case.get("microbatches") or n_mb
        style = case.get("stages", "csv")
        if style == "csv":
            mapping = S._validate_schedule(actions, world, n_stages, M)
            mine = sorted(s for s, r in mapping.items() if r == rank)
        else:
            mine = _torchtitan_stage_indices(rank, world, style, n_stages)
    partition = case.get("partition") or [1] * n_stages
    if len(partition) != n_stages:
        raise ValueError(f"partition {partition} does not give {n_stages} stages")
    try:
        return _run_built(case, rank, world, torch, dist, S, nn, PipelineStage, model, mb_size, builtin,
                          n_stages, M, mine, partition)
    except _Refused as e:
        return {"id": case["id"], "rank": rank, "refused": str(e)}


class _Refused(Exception):
    """A schedule PyTorch refuses to build (every rank refuses it alike, before any message)."""


def _run_built(case, rank, world, torch, dist, S, nn, PipelineStage, model, mb_size, builtin, n_stages, M, mine,
               partition):
    n_layers = sum(partition)
    blocks = _blocks(model, n_layers, torch, nn)
    first = [sum(partition[:s]) for s in range(n_stages)]
    stages, modules = [], {}
    for s in mine:
        mod = nn.Sequential(*blocks[first[s]:first[s] + partition[s]])
        modules[s] = mod
        stages.append(PipelineStage(mod, s, n_stages, torch.device("cpu")))

    batch = M * mb_size
    loss_fn = _loss(model, case.get("loss", "mean"), batch, torch)
    if builtin:
        cls = S.get_schedule_class(builtin["class"])
        try:
            if issubclass(cls, S.PipelineScheduleSingle):
                sched = cls(stages[0], M, loss_fn=loss_fn, scale_grads=case.get("scale_grads", True))
            else:
                sched = cls(stages, M, loss_fn=loss_fn, scale_grads=case.get("scale_grads", True))
        except Exception as e:  # the class does not take this case (e.g. its micro-batch rule)
            if case.get("refusal_ok"):
                raise _Refused(f"{type(e).__name__}: {str(e).splitlines()[0]}")
            raise
    else:
        sched = S._PipelineScheduleRuntime(stages, M, loss_fn=loss_fn, scale_grads=case.get("scale_grads", True))
        sched._load_csv(case["csv"], format=case["format"])

    x, y = _batch(model, M, mb_size, torch)
    has_first, has_last = 0 in mine, (n_stages - 1) in mine

    def one_step():
        for m in modules.values():
            m.zero_grad(set_to_none=True)
        losses = [] if has_last else None
        sched.step(*((x,) if has_first else ()), target=y if has_last else None, losses=losses)
        return losses

    losses = one_step()
    ref_loss, ref_grads = _reference(model, n_layers, M, mb_size, torch, nn)
    max_err, sq, ref_sq, params = 0.0, 0.0, 0.0, 0
    for s, mod in modules.items():
        for k in range(partition[s]):
            for name, p in mod[k].named_parameters():
                ref = ref_grads[first[s] + k][name]
                g = p.grad if p.grad is not None else torch.zeros_like(ref)
                scale = ref.abs().max().item()
                err = (g - ref).abs().max().item() / (scale if scale > 0 else 1.0)
                max_err = max(max_err, err)
                sq += g.double().pow(2).sum().item()
                ref_sq += ref.double().pow(2).sum().item()
                params += 1
    loss = None
    if has_last:
        vals = [v.item() for v in losses]
        loss = sum(vals) / len(vals) if case.get("loss", "mean") == "mean" else sum(vals)

    result = {"id": case["id"], "rank": rank, "stages": mine, "loss": loss, "ref_loss": ref_loss,
              "max_grad_err": max_err, "grad_sq": sq, "ref_grad_sq": ref_sq, "params": params}

    # Step times: every rank starts together; a step's time is the slowest rank's.
    if case.get("time_steps"):
        for _ in range(case.get("warmup", 2)):
            one_step()
        times, cpu = [], []
        for _ in range(case["time_steps"]):
            dist.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            one_step()
            times.append((time.perf_counter() - t0) * 1000.0)
            cpu.append((time.process_time() - c0) * 1000.0)
        result["step_ms"] = times
        result["cpu_ms"] = cpu  # this rank's CPU time in the step (all its threads)
    if case.get("trace_layout"):
        result["traces"] = _write_layout_traces(case, rank, one_step, dist)
    elif case.get("memory") or case.get("trace_dir"):
        from torch.profiler import profile, ProfilerActivity
        dist.barrier()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=bool(case.get("memory"))) as prof:
            one_step()
        trace_dir = case.get("trace_dir") or tempfile.gettempdir()
        os.makedirs(trace_dir, exist_ok=True)
        prefix = case.get("trace_name", case["id"].replace("/", "_"))
        if not case.get("trace_dir"):
            prefix = f"ps_memory_{os.getpid()}_{prefix}"
        path = os.path.join(trace_dir, f"{prefix}_rank{rank}.json" if prefix else f"rank{rank}.json")
        prof.export_chrome_trace(path)
        if case.get("memory"):
            result["peak_bytes"] = _peak_from_trace(path)
        if not case.get("trace_dir"):
            os.remove(path)
        else:
            result["trace"] = path
    return result


def _write_layout_traces(case, rank, one_step, dist):
    """Profiles steps and writes their traces where the frameworks do (gzip, as they do):
    torchtitan: <dir>/profiling/traces/iteration_<step>/rank<r>_trace.json.gz (its
    trace_handler: export_chrome_trace, record_shapes=True), one folder per step in
    `trace_steps`; Megatron-LM: <dir>/torch_profile/rank-<r>.json.gz; tensorboard:
    torch.profiler.tensorboard_trace_handler(<dir>, use_gzip=True) names the file itself
    (<host>_<pid>.<ns>.pt.trace.json.gz, the rank only inside). Returns the files written."""
    from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler

    layout, root = case["trace_layout"], case["trace_dir"]
    written = []
    for step in case.get("trace_steps", [1]):
        dist.barrier()
        if layout == "tensorboard":
            before = set(os.listdir(root)) if os.path.isdir(root) else set()
            with profile(activities=[ProfilerActivity.CPU], on_trace_ready=tensorboard_trace_handler(root, use_gzip=True)):
                one_step()
            written += [os.path.join(root, f) for f in sorted(set(os.listdir(root)) - before)]
            continue
        if layout == "torchtitan":
            path = os.path.join(root, "profiling", "traces", f"iteration_{step}", f"rank{rank}_trace.json.gz")
        elif layout == "megatron":
            path = os.path.join(root, "torch_profile", f"rank-{rank}.json.gz")
        else:
            raise ValueError(f"unknown trace_layout {layout}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=layout == "torchtitan") as prof:
            one_step()
        prof.export_chrome_trace(path)
        written.append(path)
    return written


def _trace_ranges(on):
    """pipestudio.trace_ranges (resources/python) on or off for the cases that follow."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources", "python"))
    import pipestudio.trace_ranges as trace_ranges

    if on:
        trace_ranges.enable()
    else:
        trace_ranges.disable()


def _skip_self_warmup(PipelineStage):
    """PyTorch 2.11's stages open their p2p links before the first step by sending a dummy
    tensor to the previous and the next stage's rank (_get_init_p2p_neighbors_ops). At the turn
    of a V (stages D-1 and D on one rank) that rank is the stage's own, and Gloo refuses a send
    to oneself ("Pair is not connected"); NCCL accepts it. The runtime never sends between
    stages of one rank (its "V-schedule special case"), so the warm-up leaves those out."""
    original = PipelineStage._get_init_p2p_neighbors_ops

    def warmup(self):
        return [op for op in original(self) if op.group_peer != self.group_rank]

    PipelineStage._get_init_p2p_neighbors_ops = warmup


def worker(rank, world, store_path, cases_path, out_path):
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S

    torch.set_num_threads(1)
    _skip_self_warmup(PipelineStage)
    with open(cases_path) as f:
        cases = json.load(f)
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=RANK_TIMEOUT_S))
    results = []

    def save():
        with open(out_path + ".tmp", "w") as f:
            json.dump(results, f)
        os.replace(out_path + ".tmp", out_path)

    for case in cases:
        try:
            if "trace_ranges" in case or any("trace_ranges" in c for c in cases):
                _trace_ranges(bool(case.get("trace_ranges")))
            results.append(run_case(case, rank, world, torch, dist, S, nn, PipelineStage))
        except BaseException:
            # One rank's failure leaves its peers waiting: stop this rank at once, naming the
            # case; the parent ends the others.
            print(f"rank {rank}: case {case['id']} ({case.get('csv')}, {case.get('format')}) failed:",
                  file=sys.stderr)
            traceback.print_exc()
            save()
            sys.stderr.flush()
            os._exit(1)
        save()
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "worker":
        worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
    else:
        print("usage: pp_harness.py worker RANK WORLD STORE CASES.json OUT.json", file=sys.stderr)
        sys.exit(2)
