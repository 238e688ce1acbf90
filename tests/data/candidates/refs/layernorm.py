import torch
import torch.nn as nn

batch_size = 48
hidden = 2051


class Model(nn.Module):
    def __init__(self, hidden: int):
        super(Model, self).__init__()
        self.ln = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden]
