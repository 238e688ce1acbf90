"""LayerNorm: (x - mean) / sqrt(var + eps) * weight + bias over the last dim, in float32."""

import torch
from torch import nn


class Model(nn.Module):
    """nn.LayerNorm of size hidden_size, its weight and bias set to non-trivial values."""

    def __init__(self, hidden_size: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=eps)
        # Not ones and zeros: a kernel that ignores either must fail. Deterministic, so the
        # candidate gets the same parameters whatever the random state.
        with torch.no_grad():
            self.norm.weight.copy_(torch.linspace(0.5, 1.5, hidden_size))
            self.norm.bias.copy_(torch.linspace(-0.5, 0.5, hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.float()).to(x.dtype)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(256, 1000)]


def get_init_inputs() -> list[object]:
    return [1000, 1e-5]
