# expect: failed torch_op
# ref: o_softmax
# Attack A07: A06 with any PyTorch method: operator.methodcaller("softmax", ...) consumed
# from Triton's frame. The method name is only a string.
import functools
import operator

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def noop_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        work = map(operator.is_, map(out.copy_, map(operator.methodcaller("softmax", -1), [x])),
                   [None])

        class Grid(tuple):
            __len__ = functools.partial(sum, work)

        noop_kernel[Grid(())](x, 1, BLOCK=16)
        return out
