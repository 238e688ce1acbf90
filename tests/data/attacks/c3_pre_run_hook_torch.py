# expect: failed torch_op
# ref: relu
# Class 3, torch compute during a launch. A pre-run hook registered on the kernel
# (JITFunction/InterpretedFunction.add_pre_run_hook) runs inside the launch, with the
# launch's own tensor arguments, and computes the ReLU with PyTorch; the kernel body only
# copies the output onto itself.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)


def _prepare(x, out, *args, **kwargs):
    out.copy_(torch.relu(x))


relu_kernel.add_pre_run_hook(_prepare)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
