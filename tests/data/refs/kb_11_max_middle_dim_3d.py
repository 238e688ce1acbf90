import torch
import torch.nn as nn

batch_size = 16
dim1 = 256
dim2 = 255


class Model(nn.Module):
    """Max reduction over a given dimension of a 3D tensor (values only)."""

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=self.dim)[0]


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [1]
