import torch
import torch.nn as nn

M = 257
K = 383
N = 129


class Model(nn.Module):
    """Rectangular matrix multiplication (M, K) x (K, N) with odd sizes."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.mm(A, B)


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
