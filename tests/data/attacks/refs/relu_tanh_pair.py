import torch
import torch.nn as nn

batch_size = 64
dim = 2053


class Model(nn.Module):
    """Two activations of the same input, returned as a tuple."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor):
        return (torch.relu(x), torch.tanh(x))


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
