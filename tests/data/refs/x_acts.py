import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self): super().__init__()
    def forward(self, x):
        return F.hardsigmoid(x) + F.hardswish(x) + F.softsign(x) + F.mish(x) + F.logsigmoid(x) + F.relu6(x) + F.tanhshrink(x) + F.gelu(x, approximate='tanh') + F.softplus(x, beta=2, threshold=10) + F.celu(x) + F.selu(x)
def get_inputs(): return [torch.randn(64, 1001)]
def get_init_inputs(): return []
