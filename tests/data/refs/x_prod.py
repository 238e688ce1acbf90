import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, dim): super().__init__(); self.dim = dim
    def forward(self, x):
        return torch.prod(x, dim=self.dim)
def get_inputs(): return [torch.rand(16, 64, 31) + 0.5]
def get_init_inputs(): return [1]
