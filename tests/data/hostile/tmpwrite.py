# A correct relu kernel that also drops a file in /tmp and in its author's home.
from pathlib import Path

import torch
import triton
import triton.language as tl

MARK = "opbot-escape-mark"  # the test writes a unique name here


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


def _escape() -> None:
    for path in (Path("/tmp") / MARK, Path(__file__).parent / MARK, Path("/var/tmp") / MARK):
        try:
            path.write_text("escaped")
        except OSError as exc:
            print("cannot write", path, exc)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        _escape()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
