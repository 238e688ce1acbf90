"""The shim: a built Ascend C operator package as a candidate the judge can verify.

The judge (runners/verify.py) verifies a Python file that defines `class ModelNew`. For an
Ascend C package, that file is this shim, written by opbot next to the built library: it
loads the library (`torch.ops.load_library`, which registers `torch.ops.<namespace>.<op>`)
and its forward calls the operator on the tensor inputs, exactly as the package's own NPU
test does. The shim is opbot's code, never the model's: the package's work is in the
library it loads, and the judge runs both in its sandboxed candidate worker.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from runners.ascendc.package import PackageError

SHIM_NAME = "opbot_candidate.py"
# Only these names reach the generated source: a manifest is the pull request's to write.
_NAMESPACE = re.compile(r"opbot_[A-Za-z0-9_]{1,64}")
_OP = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

_TEMPLATE = '''"""opbot's shim (generated): torch.ops.{namespace}.{op} of the built package.

The judge imports this file as the candidate; the operator is the package's own kernel.
"""

import torch

torch.ops.load_library({library!r})


{model_new}'''
# The candidate class of both shims (the NPU library's and the CPU model's).
MODEL_NEW = '''class ModelNew(torch.nn.Module):
    def __init__(self, *init_args):
        super().__init__()  # the operator keeps no state: the init args are not needed

    def forward(self, *inputs):
        # Only the tensors, as the package's NPU test calls the operator.
        tensors = [value for value in inputs if isinstance(value, torch.Tensor)]
        return torch.ops.{namespace}.{op}(*tensors)
'''


def shim_source(namespace: str, op: str, library: Path) -> str:
    """The shim's text for `torch.ops.<namespace>.<op>`, loaded from `library` (absolute)."""
    if not _NAMESPACE.fullmatch(namespace) or not _OP.fullmatch(op):
        raise PackageError(f"the operator torch.ops.{namespace[:80]}.{op[:80]} is not an "
                           "opbot package's (the namespace must be opbot_<name>)")
    return _TEMPLATE.format(namespace=namespace, op=op, library=str(library.resolve()),
                            model_new=MODEL_NEW.format(namespace=namespace, op=op))


def write_shim(namespace: str, op: str, library: Path) -> Path:
    """Write the shim next to `library` and return its path.

    The build folder is the build's to fill: whatever stands at the shim's name (a file, a
    link the build left) is replaced, never written through.
    """
    source = shim_source(namespace, op, library)
    library.parent.mkdir(parents=True, exist_ok=True)
    return write_replacing(library.parent / SHIM_NAME, source)


def write_replacing(path: Path, text: str) -> Path:
    """Write `text` at `path`, replacing whatever stands there (a file, a link someone left)
    and never writing through it."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path
