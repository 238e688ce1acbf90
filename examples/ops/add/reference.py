"""Add: x + y, two tensors of the same shape."""

import torch
from torch import nn


class Model(nn.Module):
    """Adds two tensors elementwise."""

    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(256, 1024), torch.randn(256, 1024)]


def get_init_inputs() -> list[object]:
    return []
