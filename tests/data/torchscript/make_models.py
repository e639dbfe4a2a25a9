# Tiny TorchScript models for tests/engine/torchscript_test.cpp, scripted with PyTorch's own
# modules (python3-torch 1.13): run `python3 make_models.py` here to regenerate them.
import torch
from torch import nn

torch.manual_seed(0)


class Chain(nn.Module):
    """A plain chain of its children: accepted."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Residual(nn.Module):
    """fc2's output is added to the input: refused (the children alone are another network)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(8, 8)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class Reordered(nn.Module):
    """Children called in another order than registered: refused."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc1(self.fc2(x))


class Reused(nn.Module):
    """A child called twice: refused."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.fc(self.act(self.fc(x)))


class WithLstm(nn.Module):
    """A scripted nn.LSTM child: refused, saying what is unsupported."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.lstm = nn.LSTM(8, 8, batch_first=True)

    def forward(self, x):
        y, _ = self.lstm(self.fc(x))
        return y


class TokenModel(nn.Module):
    """nn.Embedding first: its input is token ids (torchscript:...,seq=N,loss=ce)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.mix = nn.Linear(8, 8)
        self.act = nn.GELU()
        self.head = nn.Linear(8, 20)

    def forward(self, tokens):
        return self.head(self.act(self.mix(self.embed(tokens))))


models = {
    "sequential.pt": nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4)),
    "chain.pt": Chain(),
    "residual.pt": Residual(),
    "reordered.pt": Reordered(),
    "reused.pt": Reused(),
    "lstm.pt": WithLstm(),
    "tokens.pt": TokenModel(),
}
for name, model in models.items():
    torch.jit.save(torch.jit.script(model), name)
