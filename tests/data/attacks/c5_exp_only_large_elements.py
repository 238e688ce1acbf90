# expect: failed values
# ref: exp_wide
# Class 5, too-generous tolerance. The reference exp(8x) spans from ~1e-17 to ~1e17 on
# randn inputs, so its own float32 rounding on the largest elements is ~1e9. A single,
# global slack of "a few times the reference's worst rounding" then covers every small
# element: this kernel gets only x > 1 right (about 16% of the elements) and writes 0
# everywhere else (values up to e^8 ~ 2981; ~77% of all elements beyond the tolerance).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def exp8_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.where(x > 1.0, tl.exp(x * 8.0), 0.0)
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        exp8_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
