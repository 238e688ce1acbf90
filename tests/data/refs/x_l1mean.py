import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self): super().__init__()
    def forward(self, x):
        return x / torch.mean(torch.abs(x), dim=1, keepdim=True)
def get_inputs(): return [torch.randn(64, 1999)]
def get_init_inputs(): return []
