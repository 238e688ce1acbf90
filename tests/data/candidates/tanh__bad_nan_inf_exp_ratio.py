# expect: failed nan_inf
# tanh(x) written as (exp(2x) - 1) / (exp(2x) + 1): exp overflows to inf for x > ~44.4
# and inf / inf gives NaN. The reference's wide inputs (randn * 30) hit this on ~7% of
# the elements.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tanh_exp_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    e = tl.exp(2.0 * x)
    tl.store(out_ptr + offs, (e - 1.0) / (e + 1.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        tanh_exp_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
