# expect: failed values
# Computes softmax into a scratch buffer but returns the never-written torch.empty_like
# output (uninitialised memory: often zeros on a fresh allocation, sometimes garbage).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        scratch = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, scratch, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
