import torch
import torch.nn as nn

batch_size = 256
hidden = 1536
eps = 1e-6


class Model(nn.Module):
    """RMS normalisation over the last dimension, written by hand, with a learnable weight."""

    def __init__(self, hidden: int, eps: float = 1e-6):
        super(Model, self).__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight


def get_inputs():
    x = torch.randn(batch_size, hidden)
    return [x]


def get_init_inputs():
    return [hidden, eps]
