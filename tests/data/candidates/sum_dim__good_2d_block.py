# expect: passed
# General sum over any dim (keepdim): view x as (outer, R, inner); each program owns a
# (BLOCK_O x BLOCK_I) tile of outputs and walks the reduced axis. 2D blocks, 2D grid.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_mid_kernel(x_ptr, out_ptr, OUTER, R, INNER,
                   BLOCK_O: tl.constexpr, BLOCK_I: tl.constexpr):
    pid_o = tl.program_id(0)
    pid_i = tl.program_id(1)
    o = pid_o * BLOCK_O + tl.arange(0, BLOCK_O)
    i = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    mask = (o[:, None] < OUTER) & (i[None, :] < INNER)
    base = o[:, None] * (R * INNER) + i[None, :]
    acc = tl.zeros((BLOCK_O, BLOCK_I), dtype=tl.float32)
    for r in range(0, R):
        acc += tl.load(x_ptr + base + r * INNER, mask=mask, other=0.0)
    tl.store(out_ptr + o[:, None] * INNER + i[None, :], acc, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        x = x.contiguous()
        outer = 1
        for s in x.shape[:dim]:
            outer *= s
        inner = 1
        for s in x.shape[dim + 1:]:
            inner *= s
        r = x.shape[dim]
        out = torch.empty(x.shape[:dim] + (1,) + x.shape[dim + 1:], dtype=x.dtype)
        BLOCK_O, BLOCK_I = 16, 16
        grid = (triton.cdiv(outer, BLOCK_O), triton.cdiv(inner, BLOCK_I))
        sum_mid_kernel[grid](x, out, outer, r, inner, BLOCK_O=BLOCK_O, BLOCK_I=BLOCK_I)
        return out
