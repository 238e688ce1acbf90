import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 300
hidden = 97


class Model(nn.Module):
    """Softmax over dim 1 of a 3D tensor (not the last, contiguous dim)."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softmax(x, dim=1)


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden)
    return [x]


def get_init_inputs():
    return []
