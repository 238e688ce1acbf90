# expect: failed torch_op
# The kernel only computes exp(x - rowmax); the normalising row sum and the division are
# done with torch (e.sum(dim=1, keepdim=True)). Values are right; the op is half torch.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def exp_shift_kernel(x_ptr, e_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(e_ptr + row * n_cols + cols, e, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        e = torch.empty_like(x)
        exp_shift_kernel[(rows,)](x, e, cols, BLOCK=triton.next_power_of_2(cols))
        return e / e.sum(dim=1, keepdim=True)
