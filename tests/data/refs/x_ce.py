import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self): super().__init__()
    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)
def get_inputs(): return [torch.randn(128, 10), torch.randint(0, 10, (128,))]
def get_init_inputs(): return []
