#!/usr/bin/env python3
"""Writes tests/data/pytorch/: the per-rank orders PyTorch's own code produces.

Every file here comes from torch.distributed.pipelining at the version in MANIFEST.json, run
by this script (no PipeStudio code is involved):

- `<Class>_pp<P>_mb<M>_spr<V>_compute_only.csv`: the class's `pipeline_order`, as
  `get_schedule_ops(..., with_comms=False)` returns it and `_dump_csv` writes it (one row per
  rank, `None` as an empty cell). For GPipe and 1F1B this is the order IR that
  `PipelineScheduleSingle._get_pipeline_order` builds (with its idle cells and REDUCE_GRAD).
- `<...>_executed.csv` (single-stage classes only): the compute actions that the class's
  `_step_microbatches` actually runs on each rank, recorded by running it against a stage
  stand-in that records forward_one_chunk / backward_one_chunk and has no communication. For
  these classes the IR above is only a description; this is what trains. (For 1F1B the two
  differ: the IR's last rank starts at F1 and ends at F(M), and PyTorch's own
  `_validate_schedule` refuses it; the manifest's `ir_validation_error` says so.)
- `<...>_compute_comms.csv`: `_PipelineScheduleRuntime._prepare_schedule_with_comms` applied to
  that order (`get_schedule_ops(..., with_comms=True)`): UNSHARD/RESHARD, REDUCE_GRAD and
  SEND/RECV as PyTorch's lowering places them. PyTorch's visualizer cannot lower the
  single-stage classes (it passes a single stage where a list is expected), so for GPipe and
  1F1B the same lowering runs on the executed order (compute actions only, the form
  `_load_csv(format="compute_only")` accepts).

- `<...>_compute_comms_deferred.csv` (PyTorch 2.13 and later, which have `defer_pp_recv`): the
  same lowering with `_PipelineScheduleRuntime(defer_pp_recv=True)`, i.e. `_defer_recv_ops` run
  last: each RECV moved next to the compute op that consumes it, with the rank-parity rule
  (`get_schedule_ops(..., with_comms=True, defer_pp_recv=True)` for the multi-stage classes).

MANIFEST.json: the torch version, the command, and one entry per case (class, pp, micro-batches,
stages per rank, files, or PyTorch's error when it refuses the case).

Usage: python make_golden_orders.py OUT_DIR [--pp 2,4]   (in the project's PyTorch environment;
tests/data/pytorch is torch 2.11's, the pinned version; tests/data/pytorch-2.15 torch 2.15's, for
pipeline degrees 2 and 4, made with a torch 2.15 environment of the same requirements)
"""
import csv
import inspect
import json
import os
import sys
from unittest import mock

import torch
from torch.distributed.pipelining import schedules as S
from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops
from torch.distributed.pipelining.stage import PipelineStage

SINGLE = ["GPipe", "1F1B"]
MULTI = {  # class -> stages per rank it is run with
    "Interleaved1F1B": [2, 3],
    "LoopedBFS": [2, 3],
    "InterleavedZeroBubble": [1, 2, 3],
    "ZBVZeroBubble": [2],
    "DualPipeV": [2],
}
PP = [2, 4, 8]
# defer_pp_recv (PyTorch PR #178815) exists from 2.13 on.
DEFER = "defer_pp_recv" in inspect.signature(get_schedule_ops).parameters


def microbatch_counts(pp):
    # pp, 2pp, 3pp, an odd count PyTorch's interleaved classes accept (pp + 1: one round),
    # one they may refuse (2pp + 1: two rounds that do not divide it), and fewer than pp.
    return sorted({pp, 2 * pp, 3 * pp, pp + 1, 2 * pp + 1, max(1, pp // 2)})


def schedule_ops(cls_name, pp, mb, spr, with_comms=False, defer=False):
    """get_schedule_ops, and the same for one stage per rank of a multi-stage class (which the
    visualizer refuses but the class itself accepts: ZB-H1 is InterleavedZeroBubble with one)."""
    extra = {"defer_pp_recv": True} if defer else {}
    if spr >= 2 or cls_name in SINGLE:
        return get_schedule_ops(cls_name, pp, mb, num_stages_per_rank=spr, with_comms=with_comms, **extra)
    sched = S.get_schedule_class(cls_name)(mock_stages(pp, spr), mb, **extra)
    order = sched.pipeline_order_with_comms if with_comms else sched.pipeline_order
    return [list(order[r]) for r in range(pp)]


def write_rows(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for r in rows:
            w.writerow(["" if a is None else str(a) for a in r])


def mock_stages(pp, spr, rank=0):
    st = mock.create_autospec(PipelineStage, instance=True)
    st.group_rank = rank
    st.group_size = pp
    st.submod = None
    st.num_stages = pp * spr
    return [st for _ in range(spr)]


def lower_single(order, pp, mb, defer=False):
    """PyTorch's lowering of a single-stage class's order (idle cells and REDUCE_GRAD dropped)."""
    rt = S._PipelineScheduleRuntime(mock_stages(pp, 1), mb, **({"defer_pp_recv": True} if defer else {}))
    compute = {r: [a for a in order[r] if a is not None and a.is_compute_op] for r in range(pp)}
    rt._prepare_schedule_with_comms(compute)
    return [rt.pipeline_order_with_comms[r] for r in range(pp)]


class _RecordingStage:
    """What a PipelineScheduleSingle needs of its stage, with no communication: records the
    compute calls in the order the schedule makes them."""

    def __init__(self, index, num_stages, log):
        self.stage_index, self.num_stages, self.log = index, num_stages, log
        self.is_first, self.is_last = index == 0, index == num_stages - 1
        self.has_backward = True
        self.output_chunks = []

    def clear_runtime_states(self):
        pass

    def _get_init_p2p_neighbors_ops(self):
        return []

    def _prepare_forward_infra(self, *a, **k):
        return ()

    def _prepare_backward_infra(self, *a, **k):
        pass

    def get_fwd_recv_ops(self, i):
        return []

    get_fwd_send_ops = get_bwd_recv_ops = get_bwd_send_ops = get_fwd_recv_ops

    def forward_one_chunk(self, i, *a, **k):
        self.log.append(S._Action(self.stage_index, S.F, i))
        return None

    def backward_one_chunk(self, i, loss=None, full_backward=True, last_backward=False):
        self.log.append(S._Action(self.stage_index, S.B if full_backward else S.I, i))

    def backward_weight_one_chunk(self, i, last_backward=False):
        self.log.append(S._Action(self.stage_index, S.W, i))

    def perform_reduce_grad(self, scale):
        self.log.append(S._Action(self.stage_index, S.REDUCE_GRAD, None))

    def _update_losses(self, *a):
        pass

    def __getattr__(self, name):
        # Any other hook a newer PyTorch calls on its stage (buffer release, send waits): nothing
        # to do without communication.
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None


def executed_single(cls, pp, mb):
    rows = []
    for rank in range(pp):
        log = []
        sched = cls(_RecordingStage(rank, pp, log), mb)
        # The stand-in has no communication to set up (PyTorch 2.15 checks its transport here).
        sched._initialize_stage = lambda *args, **kwargs: None
        sched._step_microbatches()
        rows.append(log)
    return rows


def main(out, pps):
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".csv"):
            os.remove(os.path.join(out, f))
    cases = []
    plan = [(c, 1) for c in SINGLE] + [(c, v) for c, vs in MULTI.items() for v in vs]
    for cls_name, spr in plan:
        cls = S.get_schedule_class(cls_name)
        for pp in pps:
            for mb in microbatch_counts(pp):
                base = f"{cls_name}_pp{pp}_mb{mb}_spr{spr}"
                case = {"class": f"Schedule{cls_name}", "name": cls_name, "pp": pp,
                        "microbatches": mb, "stages_per_rank": spr, "files": {}}
                try:
                    order = schedule_ops(cls_name, pp, mb, spr)
                except Exception as e:  # PyTorch refuses the case: that is the fact recorded
                    case["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                    cases.append(case)
                    continue
                write_rows(os.path.join(out, base + "_compute_only.csv"), order)
                case["files"]["compute_only"] = base + "_compute_only.csv"
                executed = None
                if cls_name in SINGLE:
                    try:
                        executed = executed_single(cls, pp, mb)
                        write_rows(os.path.join(out, base + "_executed.csv"), executed)
                        case["files"]["executed"] = base + "_executed.csv"
                    except Exception as e:
                        case["executed_error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                try:
                    if cls_name in SINGLE:
                        # What runs, lowered: the IR of 1F1B is not what 1F1B runs (see README).
                        comms = lower_single({r: executed[r] for r in range(pp)}, pp, mb)
                    else:
                        comms = schedule_ops(cls_name, pp, mb, spr, with_comms=True)
                    write_rows(os.path.join(out, base + "_compute_comms.csv"), comms)
                    case["files"]["compute_comms"] = base + "_compute_comms.csv"
                except Exception as e:
                    case["compute_comms_error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                if DEFER and "compute_comms" in case["files"]:
                    try:
                        if cls_name in SINGLE:
                            deferred = lower_single({r: executed[r] for r in range(pp)}, pp, mb, defer=True)
                        else:
                            deferred = schedule_ops(cls_name, pp, mb, spr, with_comms=True, defer=True)
                        write_rows(os.path.join(out, base + "_compute_comms_deferred.csv"), deferred)
                        case["files"]["compute_comms_deferred"] = base + "_compute_comms_deferred.csv"
                    except Exception as e:
                        case["deferred_error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                if cls_name in SINGLE:
                    # PyTorch's own validation of the IR (what _load_csv runs on a file of it).
                    try:
                        S._validate_schedule({r: order[r] for r in range(pp)}, pp, pp, mb)
                    except AssertionError as e:
                        case["ir_validation_error"] = str(e).splitlines()[0]
                cases.append(case)
    manifest = {
        "generator": "PyTorch (torch.distributed.pipelining), not PipeStudio",
        "torch": torch.__version__,
        "command": "python tests/pytorch/make_golden_orders.py OUT_DIR"
        + ("" if pps == PP else " --pp " + ",".join(map(str, pps))),
        "cases": cases,
    }
    with open(os.path.join(out, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases, {sum(len(c['files']) for c in cases)} files, torch {torch.__version__}")


if __name__ == "__main__":
    args = sys.argv[1:]
    pps = PP
    if "--pp" in args:
        i = args.index("--pp")
        pps = [int(x) for x in args[i + 1].split(",")]
        del args[i : i + 2]
    main(args[0] if args else "tests/data/pytorch", pps)
