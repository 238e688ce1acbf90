# expect: failed static_tamper
# Correct softmax kernel, but on construction it monkeypatches torch.allclose and
# torch.testing.assert_close so that every in-process comparison passes.
import torch
import torch.nn as nn
import triton
import triton.language as tl


def _always_close(*args, **kwargs):
    return True


def _never_raise(*args, **kwargs):
    return None


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.allclose = _always_close
        torch.testing.assert_close = _never_raise

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
