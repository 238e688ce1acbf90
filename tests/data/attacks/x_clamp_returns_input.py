# expect: failed values
# ref: clamp10
# Invented: the reference clamps to [-10, 10], which never bites on randn inputs. The
# forward launches a kernel that does nothing and returns its input itself: a no-op that
# equals the reference on every input that stays inside the range, and is wrong (and
# aliases the input) on any value beyond it.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def noop_kernel(x_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.load(x_ptr + offsets, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.numel()
        noop_kernel[(triton.cdiv(n, 1024),)](x, n, BLOCK_SIZE=1024)
        return x
