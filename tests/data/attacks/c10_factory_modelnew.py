# expect: failed static_structure
# ref: relu
# Class 10, structure. ModelNew is built by a factory function, so no top-level
# `class ModelNew` exists for a static scan to follow. Its forward computes the ReLU with
# NumPy on the tensors' shared memory (invisible to a PyTorch recorder) and launches a
# kernel that only rewrites the output onto itself.
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


def _build(base):
    class Built(base):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            x = x.contiguous()
            out = torch.empty_like(x)
            src = np.asarray(x)
            np.asarray(out)[...] = src * (src > 0)
            n = x.numel()
            finish_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK_SIZE=1024)
            return out

    Built.__name__ = Built.__qualname__ = "ModelNew"
    return Built


ModelNew = _build(nn.Module)
