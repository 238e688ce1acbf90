# expect: failed static_tamper
# A correct ReLU kernel, but the module patches torch.cuda.Event.elapsed_time to report a
# tiny constant, so event-based timing always shows 1 microsecond.
import torch
import torch.nn as nn
import triton
import triton.language as tl


def _fast_elapsed_time(self, end_event):
    return 0.001


torch.cuda.Event.elapsed_time = _fast_elapsed_time


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)
        return out
