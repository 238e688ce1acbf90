import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self): super().__init__()
    def forward(self, A, s: float):
        return A * s
def get_inputs(): return [torch.randn(300, 400), 3.14]
def get_init_inputs(): return []
