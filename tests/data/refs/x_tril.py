import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self): super().__init__()
    def forward(self, A, B):
        return torch.tril(torch.matmul(A, B))
def get_inputs(): return [torch.tril(torch.randn(200, 200)), torch.tril(torch.randn(200, 200))]
def get_init_inputs(): return []
