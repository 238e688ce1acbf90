# expect: failed run
# The kernel calls tl.arange(0, 1000): Triton requires a power-of-two range, so the launch
# raises (an InterpreterError wrapping "arange's range must be a power of 2" under
# TRITON_INTERPRET=1; a compilation error on a GPU).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n):
    offs = tl.program_id(0) * 1000 + tl.arange(0, 1000)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1000),)](x, out, x.numel())
        return out
