# expect: failed static_torch_op
# ref: relu
# Class 3, work outside kernels. NumPy sits in a module-level dict, so no `np.` name shows
# on the forward path; np.asarray shares the CPU tensors' memory and NumPy computes the
# ReLU straight into the output. The "kernel" only loads and stores what is already there.
import numpy
import torch
import torch.nn as nn
import triton
import triton.language as tl

_HOST = {"lib": numpy}


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
        lib = _HOST["lib"]
        src = lib.asarray(x)
        lib.asarray(out)[...] = src * (src > 0)
        n = x.numel()
        finish_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK_SIZE=1024)
        return out
