# expect: failed static_stream
# Defers the kernel to a background worker thread and returns before it has run, so a
# timer around forward() measures almost nothing. The output is filled in "later".
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn
import triton
import triton.language as tl

_worker = ThreadPoolExecutor(max_workers=1)


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def _launch(x, out):
    relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pending = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        self.pending = _worker.submit(_launch, x, out)
        return out
