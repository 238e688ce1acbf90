# expect: passed
# Naive softmax without max subtraction. Numerically fragile for large logits, but exact
# enough for randn inputs, so a verifier must accept it.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def naive_softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    e = tl.where(mask, tl.exp(x), 0.0)
    s = tl.sum(e, axis=0)
    tl.store(y_ptr + row * n_cols + cols, e / s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        naive_softmax_kernel[(rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y
