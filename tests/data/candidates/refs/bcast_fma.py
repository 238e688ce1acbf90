import torch
import torch.nn as nn

M = 130
N = 515


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return x * y[None, :] + z


def get_inputs():
    return [torch.randn(M, N), torch.randn(N), torch.randn(M, N)]


def get_init_inputs():
    return []
