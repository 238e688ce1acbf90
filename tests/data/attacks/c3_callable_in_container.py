# expect: failed static_torch_op
# ref: relu
# Class 3, work outside kernels. The PyTorch function hides in a module-level dict, so the
# forward calls `_STEPS["activation"](x)`, a subscript, not a torch name. A copy kernel
# then moves the result into the output.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_STEPS = {"activation": torch.relu}


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = _STEPS["activation"](x.contiguous())
        out = torch.empty_like(result)
        n = result.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](result, out, n, BLOCK_SIZE=1024)
        return out
