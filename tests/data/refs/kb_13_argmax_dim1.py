import torch
import torch.nn as nn

batch_size = 100
dim = 2048


class Model(nn.Module):
    """Argmax over dim 1; the output is int64."""

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.dim)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [1]
