import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 256
dim = 2050
alpha = 0.7


class Model(nn.Module):
    """A chain of elementwise ops: softplus -> tanh -> elu -> selu, plus a sigmoid gate."""

    def __init__(self, alpha: float = 1.0):
        super(Model, self).__init__()
        self.alpha = alpha
        self.selu = nn.SELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(F.softplus(x))
        y = F.elu(2.0 * y - 1.0, alpha=self.alpha)
        y = self.selu(y)
        return y * x.sigmoid()


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [alpha]
