"""ReLU: max(x, 0), elementwise."""

import torch
from torch import nn


class Model(nn.Module):
    """Applies ReLU elementwise."""

    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(256, 1024)]


def get_init_inputs() -> list[object]:
    return []
