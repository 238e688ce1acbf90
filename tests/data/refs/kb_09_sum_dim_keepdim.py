import torch
import torch.nn as nn

batch_size = 64
dim1 = 4099
reduce_dim = 1


class Model(nn.Module):
    """Sum reduction over one dimension, keeping the reduced dimension."""

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    x = torch.randn(batch_size, dim1)
    return [x]


def get_init_inputs():
    return [reduce_dim]
