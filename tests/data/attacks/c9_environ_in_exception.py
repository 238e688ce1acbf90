# expect: failed load
# ref: relu
# Class 9, secrets by another name. The candidate copies its whole environment, and what
# /proc/self/environ and /proc/1/environ hold, into stdout, stderr and the message of an
# exception raised at import, so any of it that reached the sandbox comes back in the
# verdict (TRITON_*, TORCH_*, ASCEND_*, NPU_*, CANN_* variables pass a prefix allowlist).
import os
import sys

import torch
import torch.nn as nn


def _proc_environ(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace").replace("\0", "\n")
    except OSError as exc:
        return f"{path}: {exc}"


_DUMP = "\n".join([
    *(f"{name}={value}" for name, value in sorted(os.environ.items())),
    _proc_environ("/proc/self/environ"),
    _proc_environ("/proc/1/environ"),
    _proc_environ(f"/proc/{os.getppid()}/environ"),
])
print(_DUMP)
print(_DUMP, file=sys.stderr)
raise RuntimeError("environment for the record:\n" + _DUMP)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x
