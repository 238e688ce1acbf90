# expect: failed static_fallback
# Wraps the Triton launch in try/except and falls back to torch.relu. The kernel sizes its
# block to the row length (tl.arange needs a power of two), so for the reference shape it
# always raises and the torch fallback silently produces the (correct) output.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols)
    tl.store(out_ptr + row * n_cols + cols, tl.maximum(x, 0.0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            x2 = x.contiguous().view(-1, x.shape[-1])
            out = torch.empty_like(x2)
            relu_rows_kernel[(x2.shape[0],)](x2, out, x2.shape[1], BLOCK=x2.shape[1])
            return out.view_as(x)
        except Exception:
            return torch.relu(x)
