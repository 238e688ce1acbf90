# expect: failed static_tamper
# ref: o_softmax
# Attack A13: static escape + run-time escape together. `match x: case object(softmax=f)`
# fetches the tensor method by a class-pattern keyword (the static scan does not see an
# attribute named softmax); the bound method is then applied by a lazy C-level map that
# the grid's __len__ consumes from inside Triton's launcher (the A06 trick).
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
        match x:
            case object(softmax=f):
                work = map(operator.is_, map(out.copy_, map(f, [1])), [None])

        class Grid(tuple):
            __len__ = functools.partial(sum, work)

        noop_kernel[Grid(())](x, 1, BLOCK=16)
        return out
