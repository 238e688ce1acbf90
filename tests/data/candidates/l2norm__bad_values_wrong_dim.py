# expect: failed values
# Wrong reduction dim: normalises by the column norms (over dim 0) instead of the row
# norms (dim 1). Same shape and dtype, wrong values.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def col_l2norm_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < n_cols
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r in range(0, n_rows):
        x = tl.load(x_ptr + r * n_cols + cols, mask=cmask, other=0.0)
        acc += x * x
    inv = 1.0 / tl.sqrt(acc)
    for r in range(0, n_rows):
        x = tl.load(x_ptr + r * n_cols + cols, mask=cmask, other=0.0)
        tl.store(y_ptr + r * n_cols + cols, x * inv, mask=cmask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        col_l2norm_kernel[(triton.cdiv(cols, 256),)](x, y, rows, cols, BLOCK_C=256)
        return y
