import torch
import torch.nn as nn

batch_size = 8
channels = 48
height = 61
width = 67


class Model(nn.Module):
    """Per-channel affine: x * scale + bias, with (C, 1, 1) parameters over (N, C, H, W)."""

    def __init__(self, channels: int):
        super(Model, self).__init__()
        self.scale = nn.Parameter(torch.randn(channels, 1, 1))
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + self.bias


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels]
