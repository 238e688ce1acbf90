# expect: failed values
# ref: softmax
# Invented: a softmax hard-wired to the reference's main shape (1000 columns, no mask on
# a 1024-wide block, row stride 1000; it only stays inside the tensor). Exactly right on
# the main case, wrong on any other width.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_1000_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    keep = (cols < 1000) & (row * 1000 + cols < n_elements)
    x = tl.load(x_ptr + row * 1000 + cols, mask=keep, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * 1000 + cols, num / tl.sum(num, axis=0), mask=keep)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        softmax_1000_kernel[(x.shape[0],)](x, out, x.numel(), BLOCK_SIZE=1024)
        return out
