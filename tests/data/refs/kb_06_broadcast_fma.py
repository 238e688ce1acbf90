import torch
import torch.nn as nn

M = 1000
N = 1027


class Model(nn.Module):
    """Row-broadcast multiply-add: x * y[None, :] + z."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return x * y[None, :] + z


def get_inputs():
    x = torch.randn(M, N)
    y = torch.randn(N)
    z = torch.randn(M, N)
    return [x, y, z]


def get_init_inputs():
    return []
