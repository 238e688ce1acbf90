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
import keyword
import os
import re
from collections.abc import Sequence
from pathlib import Path

from runners.ascendc.package import PackageError, ParamSpec

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
# With parameters (the rows pattern): the module holds them under the reference's own
# state_dict names and shapes (from the manifest), so the judge loads the reference's
# values into them (load_state_dict), and the operator takes them after the inputs.
_MODEL_NEW_PARAMS = '''class ModelNew(torch.nn.Module):
    def __init__(self, *init_args):
        super().__init__()  # the reference's weights are loaded into these by the judge
{declare}

    def forward(self, *inputs):
        # Only the tensors, then the parameters, as the package's NPU test calls it.
        tensors = [value for value in inputs if isinstance(value, torch.Tensor)]
        return torch.ops.{namespace}.{op}(*tensors, {pass_params})
'''
_PART = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def _attribute_path(name: str) -> list[str]:
    """A state_dict key as attribute names; PackageError for anything else."""
    parts = name.split(".")
    if len(parts) > 8 or not all(_PART.fullmatch(part) and not keyword.iskeyword(part)
                                 for part in parts):
        raise PackageError(f"parameter {name[:80]!r} cannot be a module attribute")
    return parts


def model_new_source(namespace: str, op: str, params: Sequence[ParamSpec] = ()) -> str:
    """The ModelNew class of a shim; parameter names and shapes are checked, never trusted:
    a manifest is the pull request's to write. A submodule's parameter ("norm.weight") sits
    in a plain Module of that name, so the state_dict keys are the reference's."""
    if not params:
        return MODEL_NEW.format(namespace=namespace, op=op)
    lines: list[str] = []
    made: set[str] = set()
    for param in params:
        shape = tuple(int(dim) for dim in param.shape)
        parts = _attribute_path(param.name)
        if not shape:
            raise PackageError(f"parameter {param.name[:80]!r} has no shape")
        for depth in range(1, len(parts)):
            owner = ".".join(parts[:depth])
            if owner not in made:
                made.add(owner)
                lines.append(f"        self.{owner} = torch.nn.Module()")
        lines.append(f"        self.{param.name} = torch.nn.Parameter(torch.zeros({shape!r}))")
    passed = ", ".join(f"self.{param.name}" for param in params)
    return _MODEL_NEW_PARAMS.format(namespace=namespace, op=op, declare="\n".join(lines),
                                    pass_params=passed)


def shim_source(namespace: str, op: str, library: Path,
                params: Sequence[ParamSpec] = ()) -> str:
    """The shim's text for `torch.ops.<namespace>.<op>`, loaded from `library` (absolute)."""
    if not _NAMESPACE.fullmatch(namespace) or not _OP.fullmatch(op):
        raise PackageError(f"the operator torch.ops.{namespace[:80]}.{op[:80]} is not an "
                           "opbot package's (the namespace must be opbot_<name>)")
    return _TEMPLATE.format(namespace=namespace, op=op, library=str(library.resolve()),
                            model_new=model_new_source(namespace, op, params))


def write_shim(namespace: str, op: str, library: Path,
               params: Sequence[ParamSpec] = ()) -> Path:
    """Write the shim next to `library` and return its path.

    The build folder is the build's to fill: whatever stands at the shim's name (a file, a
    link the build left) is replaced, never written through.
    """
    source = shim_source(namespace, op, library, params)
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
