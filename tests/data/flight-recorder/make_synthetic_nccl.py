"""Writes synthetic_nccl_crossed/: flight-recorder dumps of a hung NCCL run, made by hand.

No GPU wrote these. They follow the format PyTorch's recorder writes (version "2.10", what
torch/csrc/distributed/c10d/FlightRecorder dumps and torch.distributed.flight_recorder's
fr_trace reads): one entry per send or receive named in group ranks ("nccl:send 0->1",
"nccl:recv 1<-0"), each batch_isend_irecv closed by an "nccl:coalesced" entry that carries the
batch's state; pickled as the watchdog writes them (nccl_trace_rank_<rank>), with Python's pickle
(protocol 2, tuples for process_group) instead of torch::jit's.

The run: ../../synthetic_1f1b_compute_comms.csv (copied as plan.csv) on two ranks, each action
of _PipelineScheduleRuntime its own batch. Both ranks issue all their ops (the host does not
wait for NCCL); 0SEND_F0 meets 1RECV_F0 and completes; then rank 0's stream holds 0SEND_F1,
which meets 1RECV_F1 only after rank 1's 1SEND_B0, which meets 0RECV_B0 only after 0SEND_F1.

    python3 make_synthetic_nccl.py
"""
import os
import pickle
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "synthetic_nccl_crossed")

# Per rank: (kind, peer, completed) in issue order.
OPS = {
    0: [("send", 1, True), ("send", 1, False), ("recv", 1, False), ("recv", 1, False)],
    1: [("recv", 0, True), ("send", 0, False), ("recv", 0, False), ("send", 0, False)],
}


def dump(rank):
    entries, record, t = [], 0, 1_795_800_000_000_000_000 + rank * 1000
    for seq, (kind, peer, done) in enumerate(OPS[rank], start=1):
        name = f"nccl:send {rank}->{peer}" if kind == "send" else f"nccl:recv {rank}<-{peer}"
        for profiling, state, retired in ((name, "scheduled", False),
                                          ("nccl:coalesced", "completed" if done else "scheduled", done)):
            t += 50_000
            entries.append({
                "record_id": record, "pg_id": 0, "process_group": ("0", "default_pg"),
                "collective_seq_id": 0, "p2p_seq_id": seq, "op_id": record + 1,
                "profiling_name": profiling, "time_created_ns": t,
                "input_sizes": [[2, 16]], "input_dtypes": ["Float"],
                "output_sizes": [[2, 16]], "output_dtypes": ["Float"],
                "state": state, "time_discovered_started_ns": None,
                "time_discovered_completed_ns": t + 10_000 if done else None,
                "retired": retired, "timeout_ms": 600_000, "is_p2p": True,
                "thread_id": "1", "thread_name": "python",
            })
            record += 1
    return {"version": "2.10", "comm_lib_version": "2.27.7",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
            "pg_status": {"0": {"last_enqueued_collective": "0", "last_started_collective": "-1",
                                "last_completed_collective": "0"}},
            "entries": entries}


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    shutil.copy(os.path.join(HERE, "..", "synthetic_1f1b_compute_comms.csv"), os.path.join(OUT, "plan.csv"))
    for rank in OPS:
        with open(os.path.join(OUT, f"nccl_trace_rank_{rank}"), "wb") as f:
            pickle.dump(dump(rank), f, protocol=2)
