# expect: failed no_kernel
# No Triton at all: sums with Python loops over .item() values and writes the results
# element by element. Right values and shape, just not a kernel.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape
        out = torch.empty((rows, 1), dtype=x.dtype)
        for i in range(rows):
            total = 0.0
            for j in range(cols):
                total += x[i, j].item()
            out[i, 0] = total
        return out
