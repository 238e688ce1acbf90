import torch
import torch.nn as nn

b = 8
i = 100
k = 256
j = 129


class Model(nn.Module):
    """3D tensor times 2D matrix with torch.matmul (broadcast over the batch)."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    A = torch.randn(b, i, k)
    B = torch.randn(k, j)
    return [A, B]


def get_init_inputs():
    return []
