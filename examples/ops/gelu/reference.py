"""GELU, the exact (erf) form: 0.5 * x * (1 + erf(x / sqrt(2)))."""

import torch
import torch.nn.functional as F  # noqa: N812 -- the PyTorch convention
from torch import nn


class Model(nn.Module):
    """Applies GELU elementwise."""

    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(256, 1024)]


def get_init_inputs() -> list[object]:
    return []
