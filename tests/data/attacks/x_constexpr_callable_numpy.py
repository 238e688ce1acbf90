# expect: failed static_torch_op
# ref: relu
# Invented: under TRITON_INTERPRET=1 a constexpr argument can be any Python object, a
# function included, and the kernel body (plain Python there) may call it. The callable
# passed as FINISH (taken from a list) computes the ReLU with NumPy on the tensors the
# forward parked: no helper's name appears in the kernel body or the forward, and NumPy
# is invisible to a PyTorch recorder.
import numpy
import torch
import torch.nn as nn
import triton
import triton.language as tl

_PARKED = []


def _finish():
    while _PARKED:
        x, out = _PARKED.pop()
        src = numpy.asarray(x)
        numpy.asarray(out)[...] = src * (src > 0)


_HOOKS = [_finish]


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr, FINISH: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, x, mask=mask)
    FINISH()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _PARKED.append((x, out))
        relu_kernel[(1,)](x, out, n, BLOCK_SIZE=triton.next_power_of_2(n), FINISH=_HOOKS[0])
        return out
