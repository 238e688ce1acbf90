# expect: failed static_torch_op
# ref: relu
# Class 3, work outside kernels. Under TRITON_INTERPRET=1 a @triton.jit body is plain
# Python, so it can call a plain Python helper, and the helper runs torch.relu on tensors the
# forward parked in a module-level list. The compute happens "inside a launch", where a
# recorder that pauses during launches does not look. (On a GPU this does not compile.)
import torch
import torch.nn as nn
import triton
import triton.language as tl

_PARKED = []


def _finish_on_host():
    if _PARKED:
        x, out = _PARKED.pop()
        out.copy_(torch.relu(x))


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, x, mask=mask)
    _finish_on_host()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _PARKED.append((x, out))
        relu_kernel[(1,)](x, out, n, BLOCK_SIZE=triton.next_power_of_2(n))
        _PARKED.clear()
        return out
