import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self): super().__init__(); self.l = nn.Linear(256, 128).half()
    def forward(self, x): return torch.relu(self.l(x))
def get_inputs(): return [torch.randn(64, 256).half()]
def get_init_inputs(): return []
