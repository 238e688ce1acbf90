# expect: failed nan_inf
# ref: log
# Invented: as many NaN as the reference, in other places. log|x| everywhere, then NaN
# at the mirror image of each negative input (element n-1-i for negative x[i]): the NaN
# count matches the reference's, their positions do not.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def log_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=1.0)
    mirror = tl.load(x_ptr + (n_elements - 1 - offsets), mask=mask, other=1.0)
    y = tl.log(tl.abs(x))
    y = tl.where(mirror < 0, float("nan"), y)
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        log_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
