"""Real torch.profiler traces of PyTorch's schedule classes, written where torchtitan,
Megatron-LM and tensorboard_trace_handler write them (gzip), import into PipeStudio with every
action matched; pipestudio.trace_ranges (resources/python) is what makes Schedule1F1B's and
Megatron-LM's importable.

The runs: pp_harness.py on 2 Gloo CPU ranks (each trains exactly as one process), traced by
pp_harness._write_layout_traces; the import: `pipestudio-cli compare PLAN FOLDER --json`
(PIPESTUDIO_CLI), whose unmatched lists must be empty. Megatron-LM itself is not installed here:
its variant is checked against a stand-in module with the signatures of Megatron-LM's
forward_step and backward_step (megatron/core/pipeline_parallel/schedules.py at the mirror's
HEAD), driven in the order of its interleaved 1F1B.
"""
import csv
import gzip
import json
import os
import subprocess
import sys
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "resources", "python"))
import pp_harness  # noqa: E402
import pipestudio.trace_ranges as trace_ranges  # noqa: E402

CLI = os.environ.get("PIPESTUDIO_CLI", os.path.join(HERE, "..", "..", "build", "app", "pipestudio-cli"))


def cli(*args, check=True):
    r = subprocess.run([CLI, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"pipestudio-cli {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def compare(plan, *traces):
    r = cli("compare", plan, *traces, "--cost", "F=1,I=1,W=1", "--json")
    return json.loads(r.stdout), r.stderr


def plan(tmp, name, *generate):
    path = os.path.join(tmp, name + ".pipe")
    cli("generate", *generate, "-o", path)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One Gloo run of 2 ranks: every schedule class case, traced into its own folder."""
    tmp = str(tmp_path_factory.mktemp("traces"))
    cases = [
        ("gpipe", "GPipe", 1, "tensorboard", [1], False),
        ("1f1b", "1F1B", 1, "torchtitan", [3, 6], True),
        ("1f1b_bare", "1F1B", 1, "torchtitan", [3], False),
        ("interleaved", "Interleaved1F1B", 2, "megatron", [1], True),
        ("interleaved_bare", "Interleaved1F1B", 2, "megatron", [1], False),
    ]
    spec = [{"id": n, "builtin": {"class": c, "stages_per_rank": k}, "microbatches": 4,
             "trace_dir": os.path.join(tmp, n), "trace_layout": lay, "trace_steps": steps, "trace_ranges": tr}
            for n, c, k, lay, steps, tr in cases]
    results = pp_harness.run_cases(2, spec, os.path.join(tmp, "work"))
    for n, *_ in cases:
        s = pp_harness.summary(results[n])
        assert s["max_grad_err"] <= 1e-5, (n, s)
    return tmp


def test_gpipe_forward_backward_ranges_import_from_tensorboard_handler_files(runs):
    folder = os.path.join(runs, "gpipe")
    files = sorted(f for f in os.listdir(folder) if f.endswith(".pt.trace.json.gz"))
    assert len(files) == 2 and all("rank" not in f for f in files), files  # the rank is inside only
    j, err = compare(plan(runs, "gpipe", "gpipe", "--devices", "2", "--microbatches", "4"), folder)
    assert j["unmatched_planned"] == [] and j["unmatched_measured"] == [], (j["unmatched_planned"], err)
    assert j["matched"] == 16


def test_1f1b_imports_with_trace_ranges_and_not_without(runs):
    p = plan(runs, "1f1b", "1f1b", "--devices", "2", "--microbatches", "4")
    j, err = compare(p, os.path.join(runs, "1f1b"))
    assert j["unmatched_planned"] == [] and j["unmatched_measured"] == [], (j["unmatched_planned"], err)
    assert j["matched"] == 18  # 8 F, 8 B, a REDUCE_GRAD per rank
    assert "step 6 (the newest of iteration_3, iteration_6)" in err, err
    j3, err3 = compare(p, os.path.join(runs, "1f1b"), "--trace-step", "3")
    assert j3["matched"] == 18 and j3["unmatched_measured"] == [], err3
    # The control: Schedule1F1B by itself records no range, and the error says what to do.
    bare = cli("compare", p, os.path.join(runs, "1f1b_bare"), "--cost", "F=1", check=False)
    assert bare.returncode == 1, bare.stderr
    assert "no pipeline actions found" in bare.stderr and "pipestudio.trace_ranges" in bare.stderr, bare.stderr


def test_interleaved_runtime_class_in_megatron_folder_with_and_without_the_module(runs):
    p = plan(runs, "interleaved", "interleaved-1f1b", "--devices", "2", "--microbatches", "4", "--chunks", "2")
    for case in ("interleaved", "interleaved_bare"):
        j, err = compare(p, os.path.join(runs, case))
        assert j["unmatched_planned"] == [] and j["unmatched_measured"] == [], (case, j["unmatched_measured"], err)
        assert j["matched"] == 92, case
        assert "Megatron-LM's traces in torch_profile/" in err


def test_module_ranges_nest_inside_the_runtimes(runs):
    # With the module the runtime's own PP:0F0 holds the stage's PP:0F0: the same name twice.
    path = os.path.join(runs, "interleaved", "torch_profile", "rank-0.json.gz")
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "user_annotation" and e["name"] == "PP:0F0"]
    assert len(names) == 2


def test_enable_is_idempotent_and_disable_restores():
    from torch.distributed.pipelining.stage import _PipelineStageBase

    before = _PipelineStageBase.forward_one_chunk
    trace_ranges.enable()
    trace_ranges.enable()
    wrapped = _PipelineStageBase.forward_one_chunk
    assert wrapped is not before and wrapped.__pipestudio_original__ is before
    trace_ranges.disable()
    assert _PipelineStageBase.forward_one_chunk is before
    assert not trace_ranges.enabled()


# --- Megatron-LM's step functions ------------------------------------------------------------


def _megatron_standin():
    """A module with Megatron-LM's forward_step / backward_step signatures and return shapes
    (megatron/core/pipeline_parallel/schedules.py), running a real model chunk."""
    import torch

    m = types.ModuleType("schedules")

    def forward_step(forward_step_func, data_iterator, model, num_microbatches, input_tensor, forward_data_store,
                     config, cp_group_size, collect_non_loss_data=False, checkpoint_activations_microbatch=None,
                     is_first_microbatch=False, current_microbatch=None, vp_stage=None, is_last_stage=True):
        unwrap = not isinstance(input_tensor, list)
        if unwrap:
            input_tensor = [input_tensor]
        output_tensor, _ = forward_step_func(data_iterator, model, input_tensor[0])
        return (output_tensor, 1) if unwrap else ([output_tensor], 1)

    def backward_step(input_tensor, output_tensor, output_tensor_grad, config):
        if input_tensor is not None:
            input_tensor.retain_grad()
        torch.autograd.backward(output_tensor, grad_tensors=output_tensor_grad)
        return input_tensor.grad if input_tensor is not None else None

    m.forward_step = forward_step
    m.backward_step = backward_step
    return m


def test_megatron_variant_names_stage_and_microbatch_of_interleaved_steps(tmp_path):
    import torch
    from torch.profiler import ProfilerActivity, profile

    tmp = str(tmp_path)
    p = plan(tmp, "megatron", "interleaved-1f1b", "--devices", "2", "--microbatches", "4", "--chunks", "2")
    order = os.path.join(tmp, "order.csv")
    cli("convert", p, order, "--csv-format", "compute_only")
    with open(order, newline="") as f:
        rows = [[c for c in row if c] for row in csv.reader(f)]
    schedules = _megatron_standin()
    rank = {"now": 0}
    trace_ranges.enable_megatron(schedules, pp_rank=lambda: rank["now"], pp_size=lambda: 2)
    try:
        torch.manual_seed(0)
        chunks = {s: torch.nn.Linear(8, 8) for s in range(4)}
        os.makedirs(os.path.join(tmp, "torch_profile"))
        for r, row in enumerate(rows):
            rank["now"] = r
            outputs = {}
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for cell in row:
                    stage, kind, mb = int(cell[0]), cell[1], int(cell[2:])
                    if kind == "F":
                        x = torch.randn(2, 8, requires_grad=True)
                        # As Megatron calls it: positional first seven, the rest by keyword; the
                        # module global looked up at each call.
                        out, _ = schedules.forward_step(lambda it, model, inp: (model(inp), None), None,
                                                        chunks[stage], 4, x, [], None, cp_group_size=1,
                                                        current_microbatch=mb, vp_stage=stage // 2)
                        outputs[(stage, mb)] = (x, out)
                    else:
                        x, out = outputs.pop((stage, mb))
                        schedules.backward_step(x, out, torch.ones_like(out), None)
            prof.export_chrome_trace(os.path.join(tmp, "torch_profile", f"rank-{r}.json.gz"))
    finally:
        trace_ranges.disable_megatron()
    assert schedules.forward_step.__name__ == "forward_step" and not hasattr(schedules.forward_step, "__wrapped__")
    j, err = compare(p, tmp)
    assert j["unmatched_planned"] == [] and j["unmatched_measured"] == [], (j["unmatched_measured"], err)
    assert j["matched"] == 32
