# expect: failed static_tamper
# ref: add_relu
# Class 10, blame. The candidate breaks torch at import (Tensor.__add__ becomes None). A
# reference that ran in the same process afterwards would raise on `x + y`, and the
# verdict would blame the reference (exit 2, "bad input") instead of failing the
# candidate. The kernel itself is a correct relu(x + y).
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.Tensor.__add__ = None


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x + y, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        add_relu_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
        return out
