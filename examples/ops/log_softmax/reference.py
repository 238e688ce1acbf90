"""Row log-softmax: x - max(x) - log(sum(exp(x - max(x)))) over the last dimension."""

import torch
from torch import nn


class Model(nn.Module):
    """Applies log_softmax over the last dimension."""

    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    # The op.yaml's first case: uniform in [-100, 100).
    return [torch.rand(256, 1024) * 200 - 100]


def get_init_inputs() -> list[object]:
    return []
