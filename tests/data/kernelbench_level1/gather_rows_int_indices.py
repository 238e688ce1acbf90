import torch
import torch.nn as nn

class Model(nn.Module):
    """Row gather: out[i] = table[idx[i]]."""
    def __init__(self):
        super().__init__()
    def forward(self, table, idx):
        return table[idx]

def get_inputs():
    return [torch.randn(65536, 1024), torch.randint(0, 65536, (8192,))]

def get_init_inputs():
    return []
