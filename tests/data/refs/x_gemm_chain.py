import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, i, o, scaling_factor, hardtanh_min, hardtanh_max):
        super().__init__(); self.gemm = nn.Linear(i, o); self.scaling_factor = scaling_factor
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max); self.gelu = nn.GELU()
    def forward(self, x):
        x = self.gemm(x); x = x * torch.sigmoid(x); x = x / 2.0; x = torch.clamp(x, min=-1.0, max=1.0); x = torch.tanh(x); x = self.hardtanh(x); x = x * self.scaling_factor; return self.gelu(x)
def get_inputs(): return [torch.randn(128, 200)]
def get_init_inputs(): return [200, 120, 0.5, -2, 2]
