# Batches for `pipestudio-cli run --inputs FILE` tests (tests/engine/inputs_file_test.cpp),
# saved with PyTorch's own torch.save (python3-torch 1.13), and the loss PyTorch computes for
# them with the TorchScript models of ../torchscript: run `python3 make_inputs.py` here.
import json

import torch
from torch.nn import functional as F

torch.manual_seed(7)
expected = {}

# chain.pt (Linear 8->16, GELU, Linear 16->4) with MSE: inputs and targets in a dict.
chain = torch.jit.load("../torchscript/chain.pt")
x = torch.randn(8, 8)
y = torch.randn(8, 4)
torch.save({"inputs": x, "targets": y}, "chain_batch.pt")
with torch.no_grad():
    expected["chain_batch.pt"] = F.mse_loss(chain(x), y).item()

# tokens.pt (Embedding 20x8 first) with cross-entropy: a (inputs, targets) tuple of int64 ids.
tokens = torch.jit.load("../torchscript/tokens.pt")
ids = torch.randint(20, (8, 5))
classes = torch.randint(20, (8, 5))
torch.save((ids, classes), "tokens_batch.pt")
with torch.no_grad():
    logits = tokens(ids)
    expected["tokens_batch.pt"] = F.cross_entropy(logits.reshape(-1, 20), classes.reshape(-1)).item()

# Inputs only (targets stay synthetic from --seed): 12 samples of width 16 for mlp:hidden=16.
torch.save(torch.randn(12, 16), "mlp_inputs.pt")

# Refused: float ids for an embedding model, a too-small batch, the pre-1.6 pickle format.
torch.save({"inputs": torch.randn(8, 5), "targets": classes}, "tokens_float.pt")
torch.save({"inputs": torch.randn(3, 8)}, "chain_short.pt")
torch.save({"inputs": torch.randn(8, 8)}, "legacy.pt", _use_new_zipfile_serialization=False)
torch.save({"inputs": torch.randint(30, (8, 5)), "targets": classes}, "tokens_out_of_range.pt")

with open("expected_losses.json", "w") as f:
    json.dump(expected, f, indent=1)
    f.write("\n")
