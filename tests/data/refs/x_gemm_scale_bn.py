import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, i, o, s):
        super().__init__(); self.gemm = nn.Linear(i, o); self.scale = nn.Parameter(torch.randn(s)); self.bn = nn.BatchNorm1d(o)
    def forward(self, x):
        x = self.gemm(x); x = x * self.scale; x = self.bn(x); return x
def get_inputs(): return [torch.randn(128, 100)]
def get_init_inputs(): return [100, 64, (64,)]
