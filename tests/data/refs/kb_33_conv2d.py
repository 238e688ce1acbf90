import torch
import torch.nn as nn

batch_size = 8
in_channels = 3
out_channels = 16
kernel_size = 3
height = 64
width = 63


class Model(nn.Module):
    """Standard 2D convolution with a square kernel, stride 1, padding 1."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
