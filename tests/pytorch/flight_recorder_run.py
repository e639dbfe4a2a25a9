"""A deliberately hanging pipeline run in PyTorch's own runtime, and each rank's flight-recorder dump.

    python flight_recorder_run.py OUT_DIR [--timeout-s 4]

Two Gloo CPU ranks (file store, loopback) build a two-stage model (one Linear + Tanh per stage),
load HANG_CSV into `_PipelineScheduleRuntime` (`_load_csv(..., format="compute_comms")`) and call
`step()`. The order hangs under any semantics: rank 0 sends its forwards only after its first
backward, which waits for rank 1's gradient, which waits for rank 0's forward. Before the step
every rank all-reduces a tensor (a collective, as a training loop's loss scaling or seed
agreement would) so the recorder has something every backend records.

Flight recorder on (TORCH_FR_BUFFER_SIZE, set here before torch starts); the process group's
timeout is --timeout-s, so the stuck wait raises. Each rank then writes what PyTorch's recorder
holds, as the watchdog of an NCCL run would write it on its timeout:
    OUT_DIR/fr_trace_rank_<rank>              torch._C._distributed_c10d._dump_fr_trace()  (pickle)
    OUT_DIR/json/fr_trace_rank_<rank>         _dump_fr_trace_json()                        (JSON)
    OUT_DIR/plan.csv                          HANG_CSV
    OUT_DIR/rank<rank>.json                   {"rank", "error": the timeout's message, "torch"}
The parent exits 0 when every rank hung, timed out and wrote its dumps; otherwise 1 with the
ranks' logs. Only the processes it starts are killed.
"""
import json
import os
import subprocess
import sys
import time

import pp_harness  # beside this file

HANG_CSV = (
    "0F0,0F1,0RECV_B0,0B0,0SEND_F0,0SEND_F1,0RECV_B1,0B1\n"
    "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n"
)
WORLD = 2


def parent(out_dir, timeout_s):
    os.makedirs(os.path.join(out_dir, "json"), exist_ok=True)
    with open(os.path.join(out_dir, "plan.csv"), "w") as f:
        f.write(HANG_CSV)
    store = os.path.join(out_dir, "store")
    if os.path.exists(store):
        os.remove(store)
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "TORCH_FR_BUFFER_SIZE": "2000"})
    procs, logs = [], []
    try:
        for rank in range(WORLD):
            log = open(os.path.join(out_dir, f"log_r{rank}.txt"), "w")
            logs.append(log)
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker", str(rank), out_dir, str(timeout_s)],
                stdout=log, stderr=subprocess.STDOUT, env=env))
        deadline = time.monotonic() + timeout_s + 120
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        pp_harness.stop_processes(procs, logs)
    ok = all(p.returncode == 0 for p in procs)
    if not ok:
        for rank in range(WORLD):
            with open(os.path.join(out_dir, f"log_r{rank}.txt")) as f:
                sys.stderr.write(f"--- rank {rank} (exit {procs[rank].returncode}) ---\n{f.read()[-4000:]}\n")
    os.remove(store) if os.path.exists(store) else None
    return 0 if ok else 1


def worker(rank, out_dir, timeout_s):
    import datetime

    import torch
    import torch.distributed as dist
    from torch._C import _distributed_c10d as c10d
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    store = dist.FileStore(os.path.join(out_dir, "store"), WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=timeout_s))
    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()) for _ in range(WORLD)]
    stage = PipelineStage(blocks[rank], rank, WORLD, torch.device("cpu"))
    sched = _PipelineScheduleRuntime([stage], n_microbatches=2, loss_fn=lambda y, t: ((y - t) ** 2).mean())
    sched._load_csv(os.path.join(out_dir, "plan.csv"), format="compute_comms")
    scale = torch.ones(1)
    dist.all_reduce(scale)  # a collective before the step, recorded by every backend
    x, t = torch.randn(4, 8), torch.randn(4, 8)
    error = None
    try:
        if rank == 0:
            sched.step(x)
        else:
            sched.step(target=t, losses=[])
    except Exception as e:  # the stuck wait times out
        error = str(e).splitlines()[0][:500]
    with open(os.path.join(out_dir, f"fr_trace_rank_{rank}"), "wb") as f:
        f.write(c10d._dump_fr_trace())
    with open(os.path.join(out_dir, "json", f"fr_trace_rank_{rank}"), "wb") as f:
        f.write(c10d._dump_fr_trace_json())
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "error": error, "torch": torch.__version__}, f)
    # The peer is stuck too: leave without the collective teardown that would wait for it.
    os._exit(0 if error else 3)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
    else:
        import argparse

        ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        ap.add_argument("out_dir")
        ap.add_argument("--timeout-s", type=float, default=4.0)
        a = ap.parse_args()
        sys.exit(parent(a.out_dir, a.timeout_s))
