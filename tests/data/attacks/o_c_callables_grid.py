# expect: failed torch_op
# ref: o_relu
# Attack A06: no Python frame of the candidate ever computes. The work is a chain of lazy
# C-level `map` objects (operator.gt, operator.mul, out.copy_); it is consumed by the
# grid's __len__ (a functools.partial of sum, a C callable), which Triton's launcher calls.
# The recorder credits each op to the nearest Python frame: Triton's, so it is exempt.
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
        work = map(operator.is_, map(out.copy_, map(operator.mul, [x],
                                                    map(operator.gt, [x], [0]))), [None])

        class Grid(tuple):
            __len__ = functools.partial(sum, work)

        noop_kernel[Grid(())](x, 1, BLOCK=16)
        return out
