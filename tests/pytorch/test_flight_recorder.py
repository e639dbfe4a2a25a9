"""PyTorch's flight recorder on a real hanging pipeline run, read by `pipestudio-cli postmortem`.

flight_recorder_run.py hangs PyTorch's _PipelineScheduleRuntime on two Gloo CPU ranks with the
recorder on and dumps it (pickle and JSON) when the stuck wait times out. What the pinned PyTorch
records decides what is checked:
- Gloo recording no send or receive (PyTorch 2.11): the dumps hold the step's all-reduce only,
  and postmortem refuses them with that reason (exit 1), naming the backend;
- a PyTorch whose Gloo records them: postmortem maps each rank's stuck op to the plan and names a
  wait cycle through both ranks.
The dumps also read the same through PipeStudio in both forms (pickle and JSON).
"""
import os
import pickle
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ.get("PIPESTUDIO_CLI", os.path.join(HERE, "..", "..", "build", "app", "pipestudio-cli"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("fr"))
    r = subprocess.run([sys.executable, os.path.join(HERE, "flight_recorder_run.py"), out, "--timeout-s", "4"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def entries(path):
    with open(path, "rb") as f:
        return pickle.load(f).get("entries", [])


def test_the_run_hung_and_every_rank_dumped_its_recorder(run):
    import json

    for rank in (0, 1):
        with open(os.path.join(run, f"rank{rank}.json")) as f:
            info = json.load(f)
        assert "Timed out" in info["error"], info
        recorded = entries(os.path.join(run, f"fr_trace_rank_{rank}"))
        names = [e["profiling_name"] for e in recorded]
        assert "gloo:all_reduce" in names, names


def test_postmortem_reads_the_dumps_as_the_pinned_pytorch_wrote_them(run):
    plan = os.path.join(run, "plan.csv")
    p2p = [e for rank in (0, 1) for e in entries(os.path.join(run, f"fr_trace_rank_{rank}")) if e.get("is_p2p")]
    for folder in (run, os.path.join(run, "json")):
        r = subprocess.run([CLI, "postmortem", plan, folder], capture_output=True, text=True, timeout=60)
        if not p2p:
            # Gloo records collectives only: nothing to map, and postmortem says why.
            assert r.returncode == 1, r.stdout + r.stderr
            assert "no point-to-point entry in the 2 dump(s) (2 entries, backend gloo)" in r.stderr, r.stderr
            assert "Gloo backend records collectives only" in r.stderr
        else:
            assert r.returncode == 0, r.stdout + r.stderr
            assert "wait cycle: rank" in r.stdout, r.stdout
            assert "0B0" in r.stdout or "0RECV_B0" in r.stdout, r.stdout


def test_validate_names_the_same_hang_without_a_run(run):
    r = subprocess.run([CLI, "validate", os.path.join(run, "plan.csv"), "--comm", "posted"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert "deadlock" in r.stderr and "B0@s0" in r.stderr, r.stderr
