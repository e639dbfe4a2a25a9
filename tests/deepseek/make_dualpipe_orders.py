#!/usr/bin/env python3
"""Writes tests/data/deepseek/dualpipe_orders.txt: the per-rank compute order of DeepSeek's own
DualPipe.step() (github.com/deepseek-ai/DualPipe, dualpipe/dualpipe.py).

No PipeStudio code is involved. The script imports DeepSeek's `dualpipe` package from the
checkout given on the command line and runs the real `DualPipe.step()` once per rank, with
the per-chunk compute and communication methods replaced by recorders (no GPU, no process
group): step()'s eight phases, its counters, its branches (middle ranks, enable_zb) and its
calls are DeepSeek's. The recorders keep step()'s bookkeeping as dualpipe.py does it:

- `_forward_compute_chunk(phase)` / `_backward_compute_chunk(phase, enable_zb)`: the direction
  is `phase ^ is_in_second_half` and the chunk id is that direction's counter
  (`current_f_chunk_id` / `current_b_chunk_id`), as in dualpipe.py. A backward with
  enable_zb computes input gradients only (I) and queues its weight gradient (WeightGradStore.
  flush); otherwise it is a full backward (B).
- `_forward_backward_compute_chunk(phase0, phase1)`: the overlapped F+B pair (the path taken
  when the modules define overlapped_forward_backward, as DeepSeek-V3's do).
- `_weight_chunk()`: WeightGradStore.pop, first in first out: the W of the oldest queued I.

Output: one `case pp=<ranks> chunks=<micro-batches>` line per case, then one line per rank:
`rank <r>:` and its ops, each `<F|B|I|W><direction>:<chunk>` or an overlapped pair
`F<d>:<c>+B<d>:<c>`. Direction 0 runs from rank 0 to rank pp-1 (its inputs are given at rank
0), direction 1 from rank pp-1 to rank 0; each direction's chunks are 0 .. chunks/2 - 1.

Usage: python make_dualpipe_orders.py DUALPIPE_CHECKOUT OUT_FILE
(tests/data/deepseek/dualpipe_orders.txt: deepseek-ai/DualPipe at commit
3da1bbea53606543d7f5f232338fc58096db30e3, torch 2.11.0 CPU.)
"""
import sys

import torch

sys.path.insert(0, sys.argv[1])
import dualpipe.comm as comm  # noqa: E402
from dualpipe.dualpipe import DualPipe  # noqa: E402

CASES = [(pp, m) for pp in (2, 4, 6, 8, 10) for m in sorted({2 * pp, 2 * pp + 2, 3 * pp, 4 * pp, 20, 30})
         if m % 2 == 0 and m >= 2 * pp] + [(12, 24), (12, 38), (16, 32), (16, 48), (2, 100)]


class Recorder(DualPipe):
    def __init__(self, rank, num_ranks):
        torch.nn.Module.__init__(self)
        self.overlapped_forward_backward = True
        self.batch_dim = 0
        self.num_ranks = num_ranks
        self.rank = rank
        self.is_first_rank = rank == 0
        self.is_last_rank = rank == num_ranks - 1
        self.is_in_second_half = rank >= num_ranks // 2
        self.is_middle_rank = (rank == num_ranks // 2 - 1) or (rank == num_ranks // 2)
        self.ops = []
        self.weights = []

    def _is_last_stage(self, direction):
        return (self.is_first_rank and direction == 1) or (self.is_last_rank and direction == 0)

    def _f(self, phase):
        d = phase ^ self.is_in_second_half
        c = self.current_f_chunk_id[d]
        self.current_f_chunk_id[d] += 1
        if self._is_last_stage(d):
            self.loss_chunks.append(torch.zeros(()))
        return f"F{d}:{c}"

    def _b(self, phase, kind="B"):
        d = phase ^ self.is_in_second_half
        c = self.current_b_chunk_id[d]
        self.current_b_chunk_id[d] += 1
        return f"{kind}{d}:{c}"

    def _forward_compute_chunk(self, phase):
        self.ops.append(self._f(phase))

    def _backward_compute_chunk(self, phase, enable_zb=False):
        op = self._b(phase, "I" if enable_zb else "B")
        if enable_zb:
            self.weights.append("W" + op[1:])
        self.ops.append(op)

    def _forward_backward_compute_chunk(self, phase0, phase1):
        self.ops.append(self._f(phase0) + "+" + self._b(phase1))

    def _weight_chunk(self):
        self.ops.append(self.weights.pop(0))

    def _recv_forward(self, phase):
        pass

    def _send_forward(self, phase):
        pass

    def _recv_backward(self, phase):
        pass

    def _send_backward(self, phase):
        pass

    def _commit_and_wait_comm(self):
        pass


def rank_order(pp, chunks, rank):
    r = Recorder(rank, pp)
    x = torch.zeros(chunks, 1)
    r.step(x, num_chunks=chunks, criterion=lambda *a: torch.zeros(()), labels=(x,))
    assert not r.weights, "weight gradients left in the queue"
    return r.ops


def main():
    comm.set_p2p_tensor_shapes([(1,)])
    comm.set_p2p_tensor_dtype(torch.float32)
    with open(sys.argv[2], "w") as f:
        f.write("# DeepSeek's DualPipe.step() per-rank order; made by tests/deepseek/make_dualpipe_orders.py\n")
        f.write("# from deepseek-ai/DualPipe 3da1bbea53606543d7f5f232338fc58096db30e3 (see the script's notes)\n")
        for pp, chunks in CASES:
            f.write(f"case pp={pp} chunks={chunks}\n")
            for rank in range(pp):
                f.write(f"rank {rank}: " + " ".join(rank_order(pp, chunks, rank)) + "\n")


if __name__ == "__main__":
    main()
