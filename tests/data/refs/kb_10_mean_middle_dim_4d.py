import torch
import torch.nn as nn

batch_size = 4
channels = 32
height = 127
width = 65


class Model(nn.Module):
    """Mean over the height dimension (a middle dim) of an NCHW tensor, keepdim=False."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=2)


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return []
