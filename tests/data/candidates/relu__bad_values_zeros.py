# expect: failed values
# The kernel stores zeros everywhere (a "stub" that was never finished). Half of a ReLU of
# signed inputs is zero, so only signed inputs reveal it quickly.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_stub_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_stub_kernel[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)
        return out
