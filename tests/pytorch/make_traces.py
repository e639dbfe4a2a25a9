#!/usr/bin/env python3
"""Writes tests/data/traces/torch-<version>/: real torch.profiler traces of pipeline schedules
running in PyTorch's own pipelining code.

For each case below, `pipestudio-cli generate` writes the plan (`plan.pipe`); pp_harness.py runs
it on Gloo CPU ranks (the model, data and checks of tests/pytorch/test_runtime.py: the step must
train exactly as one process does), one step unprofiled, then profiled steps. Two kinds of case:

- CSV cases: `convert` writes the CSV that runs (`plan_<form>.csv`) in
  `_PipelineScheduleRuntime`; one step under `torch.profiler.profile(activities=[CPU])`, whose
  `export_chrome_trace` is `rank<r>.json`, as written (plain JSON; `PP:<action>` ranges are the
  runtime's own `record_function` names).
- Schedule-class cases: one of PyTorch's classes (ScheduleGPipe, Schedule1F1B,
  ScheduleInterleaved1F1B) runs by itself, optionally with pipestudio.trace_ranges enabled, and
  its traces are written gzipped where a framework puts them (pp_harness._write_layout_traces):
  torchtitan's `profiling/traces/iteration_<step>/rank<r>_trace.json.gz`, Megatron-LM's
  `torch_profile/rank-<r>.json.gz`, or `tensorboard_trace_handler`'s
  `<host>_<pid>.<ns>.pt.trace.json.gz` (the host and pid of the machine that made them).

README.md says the command and the machine.

Usage: python make_traces.py PIPESTUDIO_CLI [OUT_DIR] [CASE...]   (in the project's PyTorch
environment; with CASE names only those folders are written again)
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pp_harness  # noqa: E402

# name, world, generate arguments, CSV form that runs
CASES = [
    ("zb-v_d2_m4", 2, ["zb-v", "--devices", "2", "--microbatches", "4"], "compute_only"),
    # Four stages per rank: the runtime's three-stage UNSHARD window reshards and unshards
    # stages again within one step.
    ("interleaved-1f1b_d2_v4_m2", 2, ["interleaved-1f1b", "--devices", "2", "--microbatches", "2", "--chunks", "4"],
     "compute_only"),
    ("1f1b_d4_m4", 4, ["1f1b", "--devices", "4", "--microbatches", "4"], "compute_comms"),
]

# PyTorch's schedule classes run by themselves, traced where frameworks write their traces.
# name, world, generate arguments, class, stages per rank, micro-batches, layout, steps, trace_ranges
CLASS_CASES = [
    # ScheduleGPipe names its ranges "Forward i" / "Backward i"; tensorboard_trace_handler's names.
    ("gpipe_d2_m4_tensorboard", 2, ["gpipe", "--devices", "2", "--microbatches", "4"], "GPipe", 1, 4,
     "tensorboard", [1], False),
    # Schedule1F1B records no range: pipestudio.trace_ranges adds them; torchtitan's folders,
    # two profiled steps (the newest is read unless another is asked for).
    ("1f1b_d2_m4_torchtitan", 2, ["1f1b", "--devices", "2", "--microbatches", "4"], "1F1B", 1, 4,
     "torchtitan", [10, 20], True),
    # A runtime class (its own PP: ranges, the module's nested in them); Megatron-LM's folder.
    ("interleaved-1f1b_d2_v2_m4_megatron", 2,
     ["interleaved-1f1b", "--devices", "2", "--microbatches", "4", "--chunks", "2"], "Interleaved1F1B", 2, 4,
     "megatron", [1], True),
]


def main(cli, out, only=()):
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ps_traces_")
    wanted = lambda name: not only or name in only  # noqa: E731
    try:
        for world in sorted({c[1] for c in CASES + CLASS_CASES}):
            cases = []
            for name, w, gen, form in CASES:
                if w != world or not wanted(name):
                    continue
                d = _fresh(out, name)
                subprocess.run([cli, "generate", *gen, "-o", os.path.join(d, "plan.pipe")], check=True)
                csv = os.path.join(d, f"plan_{form}.csv")
                subprocess.run([cli, "convert", os.path.join(d, "plan.pipe"), csv, "--csv-format", form], check=True,
                               stderr=subprocess.DEVNULL)
                cases.append({"id": name, "csv": csv, "format": form, "trace_dir": d, "trace_name": ""})
            for name, w, gen, cls, per_rank, mbs, layout, steps, ranges in CLASS_CASES:
                if w != world or not wanted(name):
                    continue
                d = _fresh(out, name)
                subprocess.run([cli, "generate", *gen, "-o", os.path.join(d, "plan.pipe")], check=True)
                cases.append({"id": name, "builtin": {"class": cls, "stages_per_rank": per_rank}, "microbatches": mbs,
                              "trace_dir": d, "trace_layout": layout, "trace_steps": steps, "trace_ranges": ranges})
            if not cases:
                continue
            results = pp_harness.run_cases(world, cases, os.path.join(work, f"w{world}"))
            for c in cases:
                s = pp_harness.summary(results[c["id"]])
                if not (s["max_grad_err"] <= 1e-5 and abs(s["loss"] - s["ref_loss"]) <= 1e-5 * abs(s["ref_loss"])):
                    raise SystemExit(f"{c['id']}: did not train as one process: {s}")
                print(f"{c['id']}: {world} ranks, max gradient error {s['max_grad_err']:.2e}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(out, "MANIFEST.json"), "w") as f:
        json.dump({"generator": "torch.profiler in PyTorch's pipelining code (Gloo, CPU)",
                   "torch": torch.__version__, "python": platform.python_version(),
                   "command": "python tests/pytorch/make_traces.py build/app/pipestudio-cli "
                              f"tests/data/traces/torch-{torch.__version__.split('+')[0]}",
                   "cases": [{"name": n, "ranks": w, "generate": g, "form": fm} for n, w, g, fm in CASES] +
                            [{"name": n, "ranks": w, "generate": g, "class": "Schedule" + cls, "stages_per_rank": k,
                              "microbatches": m, "layout": lay, "profiled_steps": st, "trace_ranges": tr}
                             for n, w, g, cls, k, m, lay, st, tr in CLASS_CASES]},
                  f, indent=1)
        f.write("\n")


def _fresh(out, name):
    d = os.path.join(out, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return d


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    version = torch.__version__.split("+")[0]
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else
         os.path.join(HERE, "..", "data", "traces", f"torch-{version}"), tuple(sys.argv[3:]))
