# expect: failed static_torch_op
# ref: relu
# Class 3, work outside kernels. Triton's interpreter module carries NumPy as an attribute:
# `triton.runtime.interpreter.np` is numpy under a Triton name. It computes the ReLU into
# the output's memory; the kernel launch is a formality.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.runtime import interpreter as _interp


@triton.jit
def finish_kernel(out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        host = _interp.np
        src = host.asarray(x)
        host.asarray(out)[...] = src * (src > 0)
        n = x.numel()
        finish_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK_SIZE=1024)
        return out
