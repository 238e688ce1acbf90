"""RMSNorm: x / sqrt(mean(x^2, last dim) + eps) * weight, computed in float32."""

import torch
from torch import nn


class Model(nn.Module):
    """RMSNorm with a learned weight of size hidden_size."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        # Not all ones: a kernel that ignores the weight must fail. Deterministic, so the
        # candidate gets the same weight whatever the random state.
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        scale = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (x32 * scale * self.weight.float()).to(x.dtype)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(256, 1000)]


def get_init_inputs() -> list[object]:
    return [1000, 1e-6]
