# expect: failed torch_op
# "Warms up" with a Triton kernel that zero-fills the output, then returns A @ B.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fill_zero_kernel(c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        C = torch.empty((A.shape[0], B.shape[1]), dtype=A.dtype)
        fill_zero_kernel[(triton.cdiv(C.numel(), 1024),)](C, C.numel(), BLOCK=1024)
        C = A @ B
        return C
