# expect: failed torch_op
# ref: o_softmax
# Attack A07: A06 for softmax with no torch compute named anywhere: exp is math.e ** x
# (operator.pow -> Tensor.__rpow__), the row sums are functools.reduce(operator.add) over
# column views, the division is operator.truediv. All of it lazy C-level maps consumed by
# the grid's __len__ from inside Triton's launcher, so the recorder exempts it.
import functools
import itertools
import math
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
        x = x.contiguous()
        ebuf = torch.empty_like(x)
        sbuf = torch.empty((x.shape[0], 1), dtype=x.dtype)
        out = torch.empty_like(x)
        cols = ebuf.unbind(1)
        steps = itertools.chain(
            map(ebuf.copy_, map(operator.pow, [math.e], [x])),
            map(sbuf.view(-1).copy_, map(functools.reduce, [operator.add], [cols])),
            map(out.copy_, map(operator.truediv, [ebuf], [sbuf])),
        )
        work = map(operator.is_, steps, itertools.repeat(None))

        class Grid(tuple):
            __len__ = functools.partial(sum, work)

        noop_kernel[Grid(())](x, 1, BLOCK=16)
        return out
