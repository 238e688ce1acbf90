import torch
import torch.nn as nn

M = 300
K = 411
N = 250


class Model(nn.Module):
    """Matrix multiplication with a transposed first operand: C = A.T @ B, A is (K, M)."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A.T @ B


def get_inputs():
    A = torch.randn(K, M)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
