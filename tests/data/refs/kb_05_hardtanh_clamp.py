import torch
import torch.nn as nn

batch_size = 333
dim = 3000
min_val = -0.5
max_val = 0.75


class Model(nn.Module):
    """HardTanh with asymmetric bounds, spelled as a clamp."""

    def __init__(self, min_val: float, max_val: float):
        super(Model, self).__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, min=self.min_val, max=self.max_val)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [min_val, max_val]
