import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self): super().__init__()
    def forward(self, predictions, targets):
        return torch.nn.functional.kl_div(torch.log(predictions), targets, reduction='batchmean')
def get_inputs(): return [torch.randn(128, 400).softmax(dim=-1), torch.randn(128, 400).softmax(dim=-1)]
def get_init_inputs(): return []
