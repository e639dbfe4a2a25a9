# Tiny TorchScript models for tests/engine/torchscript_test.cpp, scripted with PyTorch's own
# modules. The files in this folder were scripted by Debian's python3-torch 1.13
# (`python3 make_models.py` here); those in torch-2.11/ by the project's PyTorch environment
# (`~/.cache/pipestudio/torch-2.11.0/bin/python make_models.py torch-2.11`). The engine loads
# both, whichever libtorch it was built against, or refuses naming both versions.
import os
import sys

import torch
from torch import nn

torch.manual_seed(0)


class Children(nn.Module):
    """Holds the children it is given, registered in that order; a subclass's forward says
    how they are called."""

    def __init__(self, **children):
        super().__init__()
        for name, child in children.items():
            self.add_module(name, child)


class Chain(Children):
    """A plain chain of its children: accepted."""

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Residual(Children):
    """fc2's output is added to the input: refused (the children alone are another network)."""

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class Reordered(Children):
    """Children called in another order than registered: refused."""

    def forward(self, x):
        return self.fc1(self.fc2(x))


class Reused(Children):
    """A child called twice: refused."""

    def forward(self, x):
        return self.fc(self.act(self.fc(x)))


class WithLstm(Children):
    """A scripted nn.LSTM child: refused, saying what is unsupported."""

    def forward(self, x):
        y, _ = self.lstm(self.fc(x))
        return y


class TokenModel(Children):
    """nn.Embedding first: its input is token ids (torchscript:...,seq=N,loss=ce)."""

    def forward(self, tokens):
        return self.head(self.act(self.mix(self.embed(tokens))))


# Built in this order, children in the order given, so the seeded weights stay the same.
models = {
    "sequential.pt": nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4)),
    "chain.pt": Chain(fc1=nn.Linear(8, 16), act=nn.GELU(), fc2=nn.Linear(16, 4)),
    "residual.pt": Residual(fc1=nn.Linear(8, 8), act=nn.Tanh(), fc2=nn.Linear(8, 8)),
    "reordered.pt": Reordered(fc1=nn.Linear(8, 8), fc2=nn.Linear(8, 8)),
    "reused.pt": Reused(fc=nn.Linear(8, 8), act=nn.Tanh()),
    "lstm.pt": WithLstm(fc=nn.Linear(8, 8), lstm=nn.LSTM(8, 8, batch_first=True)),
    "tokens.pt": TokenModel(embed=nn.Embedding(20, 8), mix=nn.Linear(8, 8), act=nn.GELU(), head=nn.Linear(8, 20)),
    # The commonest PyTorch model shape: nn.Sequential calls each encoder layer as
    # forward(x, None, None[, False]) (its optional masks, and is_causal since torch 2.0).
    "transformer.pt": nn.Sequential(
        nn.Embedding(20, 16),
        nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True),
        nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True),
        nn.Linear(16, 20),
    ),
    "encoder.pt": nn.Sequential(
        nn.Embedding(20, 16),
        nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True), 2),
        nn.Linear(16, 20),
    ),
    # Layers whose training differs from eval: dropout, batch norm (run --optimizer trains).
    "dropout.pt": nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 4)),
    "batchnorm.pt": nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4)),
}
out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
for name, model in models.items():
    torch.jit.save(torch.jit.script(model), os.path.join(out, name))
print(f"scripted {len(models)} models with torch {torch.__version__} into {out}")
