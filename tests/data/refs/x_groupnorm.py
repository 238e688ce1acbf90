import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, f, g): super().__init__(); self.n = nn.GroupNorm(num_groups=g, num_channels=f)
    def forward(self, x): return self.n(x)
def get_inputs(): return [torch.randn(4, 16, 33, 17)]
def get_init_inputs(): return [16, 4]
