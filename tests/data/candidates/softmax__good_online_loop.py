# expect: passed
# Softmax for long rows: loops over the columns in fixed chunks. Pass 1 keeps an online
# running max and rescaled sum; pass 2 writes exp(x - max) / sum.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def online_softmax_kernel(x_ptr, y_ptr, stride_row, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride_row
    offs = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, x)
        # lanes that have only seen -inf keep s == 0 (avoid -inf - -inf)
        alpha = tl.where(m_new == -float("inf"), 1.0, tl.exp(m - m_new))
        p = tl.where(x == -float("inf"), 0.0, tl.exp(x - m_new))
        s = s * alpha + p
        m = m_new
    row_max = tl.max(m, axis=0)
    scale = tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max))
    total = tl.sum(s * scale, axis=0)
    out_base = y_ptr + row * stride_row
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(base + cols, mask=mask, other=-float("inf"))
        tl.store(out_base + cols, tl.exp(x - row_max) / total, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        online_softmax_kernel[(n_rows,)](x, y, x.stride(0), n_cols, BLOCK=128)
        return y
