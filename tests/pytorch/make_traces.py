#!/usr/bin/env python3
"""Writes tests/data/traces/torch-<version>/: real torch.profiler traces of PipeStudio's
schedules running in PyTorch's own pipelining runtime.

For each case below, `pipestudio-cli generate` writes the plan (`plan.pipe`) and `convert` the
CSV that runs (`plan_<form>.csv`); pp_harness.py runs it on Gloo CPU ranks (the model, data and
checks of tests/pytorch/test_runtime.py: the step must train exactly as one process does), one
step unprofiled, then one step under `torch.profiler.profile(activities=[CPU])`, whose
`export_chrome_trace` is `rank<r>.json`, as written (plain JSON; `PP:<action>` ranges are the
runtime's own `record_function` names). README.md says the command and the machine.

Usage: python make_traces.py PIPESTUDIO_CLI [OUT_DIR]   (in the project's PyTorch environment)
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


def main(cli, out):
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ps_traces_")
    try:
        for world in sorted({c[1] for c in CASES}):
            cases = []
            for name, w, gen, form in CASES:
                if w != world:
                    continue
                d = os.path.join(out, name)
                if os.path.isdir(d):
                    shutil.rmtree(d)
                os.makedirs(d)
                subprocess.run([cli, "generate", *gen, "-o", os.path.join(d, "plan.pipe")], check=True)
                csv = os.path.join(d, f"plan_{form}.csv")
                subprocess.run([cli, "convert", os.path.join(d, "plan.pipe"), csv, "--csv-format", form], check=True,
                               stderr=subprocess.DEVNULL)
                cases.append({"id": name, "csv": csv, "format": form, "trace_dir": d, "trace_name": ""})
            results = pp_harness.run_cases(world, cases, os.path.join(work, f"w{world}"))
            for c in cases:
                s = pp_harness.summary(results[c["id"]])
                if not (s["max_grad_err"] <= 1e-5 and abs(s["loss"] - s["ref_loss"]) <= 1e-5 * abs(s["ref_loss"])):
                    raise SystemExit(f"{c['id']}: did not train as one process: {s}")
                print(f"{c['id']}: {world} ranks, max gradient error {s['max_grad_err']:.2e}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(out, "MANIFEST.json"), "w") as f:
        json.dump({"generator": "torch.profiler in PyTorch's _PipelineScheduleRuntime (Gloo, CPU)",
                   "torch": torch.__version__, "python": platform.python_version(),
                   "command": "python tests/pytorch/make_traces.py build/app/pipestudio-cli "
                              f"tests/data/traces/torch-{torch.__version__.split('+')[0]}",
                   "cases": [{"name": n, "ranks": w, "generate": g, "form": fm} for n, w, g, fm in CASES]},
                  f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    version = torch.__version__.split("+")[0]
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else
         os.path.join(HERE, "..", "data", "traces", f"torch-{version}"))
