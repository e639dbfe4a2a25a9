"""Every kind of export PipeStudio makes, run in PyTorch's own pipelining runtime.

`pipestudio-cli` (PIPESTUDIO_CLI) writes the files here, at test time: all eight generator
kinds (and zb-h1 with two chunks, PyTorch's InterleavedZeroBubble), a searched schedule, the
hand-edited designs of tests/data/designs, in both CSV forms, on 2 and on 4 ranks. Each is loaded
by `_PipelineScheduleRuntime._load_csv` and trained one step on Gloo CPU ranks with a real model
split into its stages (pp_harness.py); loss and every gradient must equal one process training
the unsplit model on the whole batch (f32, relative 1e-5).

Also here: what torchtitan does with `convert --for torchtitan` (stages built from the schedule
class's placement, compute_only, scale_grads=False), the controls that prove the check has teeth
(a compute_comms file without REDUCE_GRAD trains M times too large gradients; receives posted in
another order than the peer sends train wrong ones, and `validate` refuses that file), PyTorch's
own compute_comms files surviving a PipeStudio round trip byte for byte, and torch.profiler traces
of the runs that `compare` matches action for action.
"""
import filecmp
import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pp_harness  # noqa: E402

SOURCE = os.environ.get("PIPESTUDIO_SOURCE_DIR", os.path.join(HERE, "..", ".."))
CLI = os.environ.get("PIPESTUDIO_CLI", os.path.join(SOURCE, "build", "app", "pipestudio-cli"))
DATA = os.path.join(SOURCE, "tests", "data")
RTOL = 1e-5

# kind, chunks, micro-batches per world size (M = 2D: every kind takes it; dualpipe-v needs it)
KINDS = [("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2), ("looped-bfs", 2), ("zb-h1", 1),
         ("zb-h1", 2), ("zb-h2", 1), ("zb-v", 2), ("dualpipe-v", 2)]
# A few more shapes on 2 ranks: odd micro-batch counts, three chunks.
EXTRA_W2 = [("1f1b", 1, 5), ("interleaved-1f1b", 3, 4), ("interleaved-1f1b", 4, 2), ("looped-bfs", 3, 3),
            ("zb-v", 2, 3), ("zb-h2", 1, 7)]
# Runs traced with torch.profiler and compared: V, four stages per rank (the runtime unshards a
# stage again within the step), and a compute_comms file run as written.
TRACED = {"w2/zb-v_d2_v2_m4/compute_only", "w2/interleaved-1f1b_d2_v4_m2/compute_only",
          "w4/1f1b_d4_v1_m8/compute_comms"}
DESIGNS = {2: "zb-v_d2_m4_hand_edited.pipe", 4: "1f1b_d4_m8_hand_edited.pipe"}
# What `convert --for torchtitan` is checked on: kind, chunks (per world size: M = 2D).
TORCHTITAN = [("1f1b", 1), ("zb-h1", 1), ("interleaved-1f1b", 2), ("zb-h1", 2), ("zb-v", 2),
              ("dualpipe-v", 2), ("looped-bfs", 3)]


def cli(*args, check=True):
    r = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"pipestudio-cli {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def header_partition(pipe_path):
    with open(pipe_path) as f:
        for line in f:
            m = re.match(r"\s*partition\s+([\d,\s]+)$", line)
            if m:
                return [int(x) for x in re.split(r"[,\s]+", m.group(1).strip())]
    return None


def both_forms(cases, pipe, base, world, **extra):
    for form in ("compute_only", "compute_comms"):
        csv = f"{base}_{form}.csv"
        cli("convert", pipe, csv, "--csv-format", form)
        cases.append({"id": f"w{world}/{os.path.basename(base)}/{form}", "csv": csv, "format": form,
                      **extra})


def drop_reduce_grad(src, dst):
    with open(src) as f:
        rows = [[c for c in line.rstrip("\n").split(",") if "REDUCE_GRAD" not in c] for line in f]
    with open(dst, "w") as f:
        for r in rows:
            f.write(",".join(r) + "\n")


def swap_in_row(text, row, a, b):
    lines = text.split("\n")
    cells = lines[row].split(",")
    i, j = cells.index(a), cells.index(b)
    cells[i], cells[j] = cells[j], cells[i]
    lines[row] = ",".join(cells)
    return "\n".join(lines)


def torchtitan_case(pipe, base, world):
    """`convert --for torchtitan`, and the case that loads its CSV the way torchtitan does."""
    csv = base + "_torchtitan.csv"
    toml = cli("convert", pipe, csv, "--for", "torchtitan").stdout
    settings = dict(re.findall(r"^(\w+) = (.+)$", toml, re.M))
    from torch.distributed.pipelining import schedules as S
    cls = S.get_schedule_class(json.loads(settings["pipeline_parallel_schedule"]))
    style = "v" if cls in (S.ScheduleZBVZeroBubble, S.ScheduleDualPipeV) else "loop"
    return {"id": f"w{world}/{os.path.basename(base)}/torchtitan", "csv": csv, "format": "compute_only",
            "stages": style, "scale_grads": False, "loss": "global", "toml": toml, "settings": settings,
            "single_stage_class": issubclass(cls, S.PipelineScheduleSingle)}


def build_cases(world, tmp):
    cases = []
    M = 2 * world
    kinds = [(k, v, M) for k, v in KINDS] + (EXTRA_W2 if world == 2 else [])
    for kind, chunks, mb in kinds:
        base = os.path.join(tmp, f"{kind}_d{world}_v{chunks}_m{mb}")
        cli("generate", kind, "--devices", str(world), "--microbatches", str(mb), "--chunks", str(chunks),
            "-o", base + ".pipe")
        both_forms(cases, base + ".pipe", base, world)
    # A searched schedule (its partition of gemma-2b's 20 layers gives the model's blocks), among
    # the schedules PyTorch can run: --no-routes leaves DualPipe's two directions out.
    base = os.path.join(tmp, f"search_d{world}")
    cli("search", "--profile", os.path.join(SOURCE, "resources", "profiles", "gemma-2b.json"), "--devices",
        str(world), "--microbatches", str(M), "--max-evaluations", "80", "--seed", "1", "--no-routes",
        "-o", base + ".pipe")
    both_forms(cases, base + ".pipe", base, world, partition=header_partition(base + ".pipe"))
    # The hand-edited design.
    design = os.path.join(DATA, "designs", DESIGNS[world])
    both_forms(cases, design, os.path.join(tmp, f"design_d{world}"), world)
    # torchtitan's way of loading `convert --for torchtitan`.
    for kind, chunks in TORCHTITAN:
        base = os.path.join(tmp, f"{kind}_d{world}_v{chunks}_m{M}")
        if not os.path.exists(base + ".pipe"):
            cli("generate", kind, "--devices", str(world), "--microbatches", str(M), "--chunks", str(chunks),
                "-o", base + ".pipe")
        cases.append(torchtitan_case(base + ".pipe", base, world))
    cases.append(torchtitan_case(os.path.join(tmp, f"search_d{world}.pipe"), os.path.join(tmp, f"search_d{world}"),
                                 world))
    cases[-1]["partition"] = header_partition(os.path.join(tmp, f"search_d{world}.pipe"))
    # Control: a compute_comms file without its REDUCE_GRAD.
    src = os.path.join(tmp, f"zb-v_d{world}_v2_m{M}_compute_comms.csv")
    dst = os.path.join(tmp, f"zb-v_d{world}_no_reduce_grad.csv")
    drop_reduce_grad(src, dst)
    cases.append({"id": f"w{world}/control/no_reduce_grad", "csv": dst, "format": "compute_comms",
                  "control": "no_reduce_grad"})
    if world == 2:
        # Control: rank 1 posts 2RECV_B0 before 1RECV_F2 while rank 0 sends 0SEND_F2 first.
        text = open(os.path.join(tmp, "zb-v_d2_v2_m4_compute_comms.csv")).read()
        swapped = os.path.join(tmp, "zb-v_d2_receive_order_swapped.csv")
        with open(swapped, "w") as f:
            f.write(swap_in_row(text, 1, "1RECV_F2", "2RECV_B0"))
        cases.append({"id": "w2/control/receive_order_swapped", "csv": swapped, "format": "compute_comms",
                      "control": "receive_order_swapped"})
    # Traces of one run per world size, for compare.
    for c in cases:
        if c["id"] in TRACED:
            c["trace_dir"] = os.path.join(tmp, "traces")
    return cases


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for world in (2, 4):
        tmp = str(tmp_path_factory.mktemp(f"w{world}"))
        cases = build_cases(world, tmp)
        results = pp_harness.run_cases(world, cases, tmp, timeout_s=400)
        out[world] = (cases, results)
    return out


def all_cases(runs, pred):
    return [(c, runs[w][1][c["id"]]) for w in runs for c in runs[w][0] if pred(c)]


def test_every_export_trains_like_one_process(runs):
    checked = []
    for case, ranks in all_cases(runs, lambda c: "control" not in c):
        s = pp_harness.summary(ranks)
        assert s["max_grad_err"] <= RTOL, (case["id"], s)
        assert s["loss"] == pytest.approx(s["ref_loss"], rel=RTOL), (case["id"], s)
        assert s["params"] > 0
        checked.append(case["id"])
    # All eight kinds, both forms, both world sizes, the searched schedule and the designs ran.
    for world in (2, 4):
        for kind, chunks in KINDS:
            for form in ("compute_only", "compute_comms"):
                assert f"w{world}/{kind}_d{world}_v{chunks}_m{2 * world}/{form}" in checked
        for name in ("search", "design"):
            for form in ("compute_only", "compute_comms"):
                assert f"w{world}/{name}_d{world}/{form}" in checked


def test_stages_are_where_the_csv_puts_them(runs):
    # zb-v on 4 ranks: rank d holds stages d and 7 - d; interleaved: d and d + 4.
    _, results = runs[4]
    assert [r["stages"] for r in results["w4/zb-v_d4_v2_m8/compute_comms"]] == [[0, 7], [1, 6], [2, 5], [3, 4]]
    assert [r["stages"] for r in results["w4/interleaved-1f1b_d4_v2_m8/compute_only"]] == \
        [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_searched_schedule_keeps_its_partition(runs):
    for world in (2, 4):
        case = next(c for c in runs[world][0] if c["id"] == f"w{world}/search_d{world}/compute_only")
        assert sum(case["partition"]) == 20  # gemma-2b's layers, split as the search chose


def test_torchtitan_settings_build_the_csvs_stages(runs):
    cases = all_cases(runs, lambda c: c["id"].endswith("/torchtitan"))
    assert len(cases) == 2 * (len(TORCHTITAN) + 1)
    for case, ranks in cases:
        world = len(ranks)
        st = case["settings"]
        assert st["pipeline_parallel_degree"] == str(world)
        assert json.loads(st["pipeline_parallel_schedule_csv"]) == case["csv"]
        assert int(st["num_pp_microbatches"]) == 2 * world
        n_stages = len({s for r in ranks for s in r["stages"]})
        per_rank = n_stages // world
        # torchtitan's stage count per rank: 1 for a single-stage class, 2 for a multi-stage one,
        # else what module_fqns_per_model_part lists (or the note says how to get it).
        fqns = re.search(r"^module_fqns_per_model_part = \[\n(.*?)\n\]", case["toml"], re.S | re.M)
        if fqns:
            assert len(fqns.group(1).splitlines()) == n_stages
        elif per_rank > 2:
            assert "pipeline_parallel_layers_per_stage" in case["toml"], case["toml"]
        else:
            assert per_rank == (1 if case["single_stage_class"] else 2), (case["id"], case["toml"])
        s = pp_harness.summary(ranks)
        assert s["max_grad_err"] <= RTOL and s["loss"] == pytest.approx(s["ref_loss"], rel=RTOL), (case["id"], s)


def test_torchtitan_refuses_what_it_cannot_build(tmp_path):
    pipe = tmp_path / "linear2.pipe"
    pipe.write_text("devices 2\nstages 4\nmicrobatches 2\nplacement linear\n"
                    "device 0: F0@s0 F0@s1 F1@s0 F1@s1 B0@s1 B0@s0 B1@s1 B1@s0\n"
                    "device 1: F0@s2 F0@s3 B0@s3 B0@s2 F1@s2 F1@s3 B1@s3 B1@s2\n")
    r = cli("convert", str(pipe), str(tmp_path / "x.csv"), "--for", "torchtitan", check=False)
    assert r.returncode == 1, r
    assert "torchtitan cannot build this placement" in r.stderr and "stage 1 is on device 0" in r.stderr, r.stderr
    assert not (tmp_path / "x.csv").exists()


def test_without_reduce_grad_gradients_are_m_times_too_large(runs):
    for world in (2, 4):
        s = pp_harness.summary(runs[world][1][f"w{world}/control/no_reduce_grad"])
        assert s["loss"] == pytest.approx(s["ref_loss"], rel=RTOL)  # the loss is right ...
        assert s["grad_norm_ratio"] == pytest.approx(2 * world, rel=1e-4)  # ... the gradients M times
        assert s["max_grad_err"] > 1.0


def test_receives_in_another_order_than_sent_train_wrong_and_are_refused(runs):
    case = next(c for c in runs[2][0] if c["id"] == "w2/control/receive_order_swapped")
    s = pp_harness.summary(runs[2][1][case["id"]])
    # PyTorch runs it without a word: Gloo pairs receives with sends in posting order, so stage 2
    # takes micro-batch 2's activation for micro-batch 0's gradient.
    assert s["max_grad_err"] > 1e-2, s
    r = cli("validate", case["csv"], check=False)
    assert r.returncode == 1, r
    assert "3rd receive device 1 posts from it is RECV_B0@s2" in r.stderr, r.stderr
    # ... and the file it was made from is valid.
    cli("validate", os.path.join(os.path.dirname(case["csv"]), "zb-v_d2_v2_m4_compute_comms.csv"))


def test_pytorch_compute_comms_files_round_trip_byte_for_byte(tmp_path):
    src = os.path.join(DATA, "pytorch")
    files = sorted(f for f in os.listdir(src) if f.endswith("_compute_comms.csv"))
    assert len(files) > 100
    for f in files:
        out = tmp_path / f
        cli("convert", os.path.join(src, f), str(out), "--csv-format", "compute_comms")
        assert filecmp.cmp(os.path.join(src, f), out, shallow=False), f


def test_compare_matches_every_action_of_the_runs_traces(runs):
    compared = 0
    for world in (2, 4):
        for case, ranks in all_cases(runs, lambda c: "trace_dir" in c and c["id"].startswith(f"w{world}/")):
            traces = [r["trace"] for r in ranks]
            pipe = case["csv"].rsplit("_compute_", 1)[0] + ".pipe"
            # Against the plan as designed (compare lowers it as the runtime does) and against
            # the CSV that ran.
            for plan in (pipe, case["csv"]):
                r = cli("compare", plan, *traces, "--cost", "F=1,I=1,W=1", "--json")
                j = json.loads(r.stdout)
                assert j["unmatched_planned"] == [] and j["unmatched_measured"] == [], (plan, j["unmatched_planned"][:5], j["unmatched_measured"][:5])
                assert j["matched"] == j["measured"]["ops"] > 0
                compared += 1
    assert compared == 2 * len(TRACED)
