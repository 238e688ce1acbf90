import torch
import torch.nn as nn

batch_size = 123
dim = 4099


class Model(nn.Module):
    """LogSoftmax through an nn.LogSoftmax module."""

    def __init__(self, dim: int = 1):
        super(Model, self).__init__()
        self.log_softmax = nn.LogSoftmax(dim=dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_softmax(x)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [1]
