import torch
import torch.nn as nn

batch_size = 12
dim1 = 300
dim2 = 129


class Model(nn.Module):
    """Argmin over the last dim of a 3D tensor, keeping the dimension; int64 output."""

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.argmin(dim=self.dim, keepdim=True)


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [2]
