# expect: failed crash
# ref: o_relu
# Attack A08: the candidate writes its own framed message on the worker's channel (the
# descriptor the worker dup'ed stdout to) before the worker answers. Its "computed" record
# holds two names equal in their first 60 characters with counts of unsortable types:
# the judge's _guard_failures sorts (name[:60], count) pairs -> TypeError in the judge.
# The real answer follows the forged one, so the judge finds bytes it never asked for
# waiting before its next request: a `crash` at once (the static scan also flags os.write),
# not the judge waiting out --timeout out of step with the worker.
import json
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def noop_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)


def _forge(fd):
    name = "a" * 60
    header = {"kind": "outputs", "output": {"t": "value", "v": 1},
              "computed": {name + "1": {"x": 1}, name + "2": [1]}, "launches": 1,
              "mutated": [], "tensors": []}
    head = json.dumps(header).encode()
    os.write(fd, b"OPB1" + len(head).to_bytes(4, "big") + head)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        noop_kernel[(1,)](x, 1, BLOCK=16)
        for fd in range(3, 12):
            try:
                if os.fstat(fd).st_mode & 0o010000:  # a FIFO: the channel
                    _forge(fd)
            except OSError:
                continue
        return torch.empty_like(x)
