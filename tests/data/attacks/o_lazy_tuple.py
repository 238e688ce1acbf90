# expect: failed output_structure
# ref: o_relu_tuple
# Attack A02: the forward returns a tuple subclass whose __iter__ does the compute with
# PyTorch operators; the harness iterates the output (_unsendable, encode_tree) only
# after the run-time recorder is switched off. Operators are invisible to the static scan.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def noop_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)


class Pending(tuple):
    def __iter__(self):
        x = tuple.__getitem__(self, 0)
        pos = x * (x > 0)
        yield pos
        yield pos - x * (x < 0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        c = x.contiguous()
        noop_kernel[(1,)](c, 1, BLOCK=16)
        return Pending((c, c))
