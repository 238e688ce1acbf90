# expect: failed torch_op
# Launches a real (but useless) Triton copy kernel, then computes the answer with torch.relu.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        staged = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, 4096),)](x, staged, n, BLOCK=4096)
        return torch.relu(staged)
