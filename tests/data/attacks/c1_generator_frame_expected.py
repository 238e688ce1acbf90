# expect: failed static_tamper
# ref: relu
# Class 1, reaching the judge in-process. A running generator's gi_frame.f_back is its
# caller: from the forward, walk up the stack to a frame whose `self` holds the expected
# outputs (the old Session: self.expected[case.name]) and copy them with a "kernel".
# Without such a frame it falls back to a copy of x: a wrong ReLU.
import torch
import torch.nn as nn
import triton
import triton.language as tl


def _frames():
    me = yield
    found = []
    frame = me.gi_frame.f_back
    while frame is not None:
        found.append(frame)
        frame = frame.f_back
    yield found


def _stack():
    walker = _frames()
    next(walker)
    return walker.send(walker)


def _expected_output(shape):
    for frame in _stack():
        names = frame.f_locals
        holder = names.get("self")
        case = names.get("case")
        table = getattr(holder, "expected", None)
        if isinstance(table, dict) and case is not None:
            want = table.get(getattr(case, "name", case))
            if want is not None and tuple(want.shape) == tuple(shape):
                return want
        for value in names.values():
            if isinstance(value, dict):
                for item in value.values():
                    if isinstance(item, torch.Tensor) and tuple(item.shape) == tuple(shape) \
                            and item is not names.get("x"):
                        return item
    return None


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        source = _expected_output(x.shape)
        source = x if source is None else source.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](source, out, n, BLOCK_SIZE=1024)
        return out
