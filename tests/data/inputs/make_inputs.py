# Batches for `pipestudio-cli run --inputs FILE` tests (tests/engine/inputs_file_test.cpp),
# saved with PyTorch's own torch.save (python3-torch 1.13), and the loss PyTorch computes for
# them with the TorchScript models of ../torchscript (in eval mode, and batchnorm.pt also in
# train mode): run `python3 make_inputs.py` here.
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

# Refused before anything runs: a NaN among the inputs (sample 5), a list of one item rather
# than a tuple (pickled with APPEND, which libtorch 1.13's reader lacks), a numpy array.
with_nan = x.clone()
with_nan[5, 3] = float("nan")
torch.save({"inputs": with_nan, "targets": y}, "chain_nan.pt")
torch.save([x], "chain_list.pt")
torch.save(x.numpy(), "chain_numpy.pt")

# batchnorm.pt (Linear, BatchNorm1d, ReLU, Linear) trained on chain_batch.pt's batch in
# micro-batches of 2: in train mode batch norm normalises each micro-batch by its own
# statistics, so the first iteration's loss is the mean of the 4 micro-batches' losses.
# (Train-mode forwards update the running statistics: eval mode gets a fresh copy.)
batchnorm = torch.jit.load("../torchscript/batchnorm.pt")
batchnorm.train()
with torch.no_grad():
    expected["batchnorm.pt train, micro-batches of 2"] = (
        sum(F.mse_loss(batchnorm(x[m : m + 2]), y[m : m + 2]).item() for m in range(0, 8, 2)) / 4
    )
    batchnorm = torch.jit.load("../torchscript/batchnorm.pt")
    batchnorm.eval()
    expected["batchnorm.pt eval"] = F.mse_loss(batchnorm(x), y).item()

with open("expected_losses.json", "w") as f:
    json.dump(expected, f, indent=1)
    f.write("\n")
