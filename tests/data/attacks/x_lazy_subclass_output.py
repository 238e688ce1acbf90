# expect: failed output_structure
# ref: relu
# Invented: the forward returns an uncomputed tensor subclass that remembers its input.
# The ReLU is computed only when something reads the output back (detach, cpu, to,
# contiguous, clone, numpy...), i.e. after the forward returned: after any recorder of
# PyTorch calls "during the forward" has stopped looking. The function is fetched by a
# computed name. The kernel launched in the forward does nothing useful.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_act = getattr(torch, "re" + "lu")


class _Deferred(torch.Tensor):
    def _value(self):
        return _act(self._source)

    def detach(self, *args, **kwargs):
        return self._value()

    def cpu(self, *args, **kwargs):
        return self._value()

    def to(self, *args, **kwargs):
        return self._value().to(*args, **kwargs)

    def contiguous(self, *args, **kwargs):
        return self._value()

    def clone(self, *args, **kwargs):
        return self._value()

    def numpy(self, *args, **kwargs):
        return self._value().numpy()

    def double(self, *args, **kwargs):
        return self._value().double()

    def float(self, *args, **kwargs):
        return self._value()

    def __array__(self, *args, **kwargs):
        return self._value().numpy()


@triton.jit
def touch_kernel(out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.zeros([BLOCK_SIZE], dtype=tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        n = out.numel()
        touch_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK_SIZE=1024)
        out.__class__ = _Deferred
        out._source = x
        return out
