"""Linear + ReLU: relu(x @ weight.T + bias)."""

import torch
from torch import nn


class Model(nn.Module):
    """nn.Linear(in_features, out_features) followed by ReLU."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(256, 300)]


def get_init_inputs() -> list[object]:
    return [300, 77]
