import torch
import torch.nn as nn

batch_size = 64
seq_len = 20
hidden = 777


class Model(nn.Module):
    """LayerNorm over the last dimension with learnable weight and bias."""

    def __init__(self, normalized_shape: tuple):
        super(Model, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape, eps=1e-5, elementwise_affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden)
    return [x]


def get_init_inputs():
    return [(hidden,)]
