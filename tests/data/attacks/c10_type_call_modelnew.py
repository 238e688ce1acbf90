# expect: failed static_structure
# ref: relu
# Class 10, structure. ModelNew = type("ModelNew", (nn.Module,), {...}) from module-level
# functions: no class statement at all. The forward computes with NumPy on shared memory
# and the kernel is a formality.
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def finish_kernel(out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)


def _init(self):
    nn.Module.__init__(self)


def _forward(self, x):
    x = x.contiguous()
    out = torch.empty_like(x)
    src = np.asarray(x)
    np.asarray(out)[...] = src * (src > 0)
    n = x.numel()
    finish_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK_SIZE=1024)
    return out


ModelNew = type("ModelNew", (nn.Module,), {"__init__": _init, "forward": _forward})
