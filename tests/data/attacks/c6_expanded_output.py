# expect: failed layout
# ref: col_mean_rows
# Class 6, strides. The reference returns a dense (batch, dim) tensor whose rows are all
# the column means. This kernel computes one row of means and returns it expanded to
# (batch, dim) with row stride 0: the right values, batch times less work and memory, and
# a tensor whose rows all alias one buffer (writing one row writes them all).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def col_mean_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_r, stride_c,
                    BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    cols = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for r in range(0, n_rows):
        acc += tl.load(x_ptr + r * stride_r + cols * stride_c, mask=mask, other=0.0)
    tl.store(out_ptr + cols, acc / n_rows, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        means = torch.empty((1, n_cols), dtype=x.dtype, device=x.device)
        col_mean_kernel[(triton.cdiv(n_cols, 256),)](
            x, means, n_rows, n_cols, x.stride(0), x.stride(1), BLOCK_SIZE=256)
        return means.expand(n_rows, n_cols)
