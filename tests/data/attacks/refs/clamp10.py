import torch
import torch.nn as nn

batch_size = 127
dim = 4099


class Model(nn.Module):
    """Clamp to [-10, 10]: on randn inputs the output equals the input."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, min=-10.0, max=10.0)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
