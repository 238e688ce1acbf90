import torch
import torch.nn as nn

batch_size = 128
in_features = 511
out_features = 300
bias_shape = (out_features,)


class Model(nn.Module):
    """Linear layer, then an extra bias, then ReLU."""

    def __init__(self, in_features: int, out_features: int, bias_shape: tuple):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = x + self.bias
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
