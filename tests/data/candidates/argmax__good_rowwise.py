# expect: passed
# Row argmax with a loop over column chunks: keeps the best value and its index and only
# replaces them on a strictly greater value, so the first maximum wins like torch.argmax.
# The int32 index from tl.argmax is stored into an int64 output.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmax_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    best_val = -float("inf")
    best_idx = 0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=-float("inf"))
        chunk_max = tl.max(x, axis=0)
        chunk_idx = tl.argmax(x, axis=0) + start
        take = chunk_max > best_val
        best_idx = tl.where(take, chunk_idx, best_idx)
        best_val = tl.where(take, chunk_max, best_val)
    tl.store(out_ptr + row, best_idx.to(tl.int64))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 2 and self.dim % 2 == 1, "argmax over the last dim of a 2D tensor"
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, dtype=torch.int64)
        argmax_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=128)
        return out
