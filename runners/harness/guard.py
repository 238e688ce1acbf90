"""Run-time anti-cheat: what a candidate's forward really does with PyTorch.

While the forward runs, two recorders watch every PyTorch call: a TorchFunctionMode sees
the functions and tensor methods Python code calls (`.numpy()`, `.tolist()` included), and
a TorchDispatchMode sees every ATen operator that reaches the dispatcher, so switching the
function layer off (`DisableTorchFunction`) hides nothing. Both stay on during kernel
launches: under the CPU interpreter a `@triton.jit` body is plain Python and may call a
helper that computes with torch. Each call is attributed to the nearest frame outside torch:
calls the Triton interpreter makes itself (copying arguments to and from the host) are its
own, every other computing call is the candidate's. Allocation, views, copies and metadata
are fine (a wrapper must allocate outputs and reshape); anything that computes (add, exp,
matmul, sum, softmax...) means PyTorch, not the kernel, did the work.

This runs inside the candidate's own process, so a candidate can still subvert it (best
effort, see docs/threat-model.md); the verdict and the comparison live elsewhere.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# PyTorch functions and tensor methods that allocate, move, view or describe data.
ALLOWED_CALLS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
    "arange", "tensor", "as_tensor", "scalar_tensor", "new_tensor", "zero_", "fill_", "to",
    "type", "type_as", "cpu", "cuda", "npu", "float", "half", "double", "bfloat16", "int",
    "long", "bool", "short", "byte", "char", "contiguous", "clone", "detach", "detach_",
    "copy_", "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze",
    "unsqueeze", "squeeze_", "unsqueeze_", "permute", "transpose", "t", "expand", "expand_as",
    "broadcast_to", "as_strided", "narrow", "select", "split", "split_with_sizes", "chunk",
    "unbind", "movedim", "cat", "concat", "concatenate", "stack", "__getitem__",
    "__setitem__", "size", "stride", "dim", "ndimension", "numel", "nelement",
    "element_size", "data_ptr", "storage_offset", "untyped_storage", "storage",
    "_typed_storage", "is_contiguous", "is_floating_point", "is_complex", "is_tensor",
    "__get__", "__set__", "__len__", "__iter__", "item", "__bool__", "__index__", "__int__",
    "__float__", "__format__", "__repr__", "__str__", "__hash__", "__reduce_ex__",
    "__deepcopy__", "__setstate__", "requires_grad_", "set_", "resize_", "record_stream",
    "pin_memory", "is_pinned", "result_type", "promote_types", "can_cast",
    "get_default_dtype", "broadcast_shapes", "is_same_size", "get_device",
    # Not here: __array__, __dlpack__, numpy, tolist: handing data to the host or another
    # library (the Triton interpreter's own hand-offs are exempt by where they come from).
})



# ATen operators (by overload packet) that allocate, move, view, copy or describe data.
ALLOWED_ATEN = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
    "new_full", "fill", "fill_", "zero_", "arange", "scalar_tensor", "lift_fresh",
    "lift_fresh_copy", "_to_copy", "to", "copy", "copy_", "_copy_from",
    "_copy_from_and_resize", "clone", "detach", "detach_", "alias", "view", "_unsafe_view",
    "_reshape_alias", "reshape", "as_strided", "as_strided_", "t", "transpose", "permute",
    "expand", "slice", "select", "narrow", "unsqueeze", "squeeze", "unsqueeze_", "squeeze_",
    "split", "split_with_sizes", "chunk", "unbind", "movedim", "cat", "stack", "flatten",
    "unflatten", "_local_scalar_dense", "is_nonzero", "set_", "resize_", "record_stream",
    "is_pinned", "_pin_memory", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
    "_has_compatible_shallow_copy_type", "contiguous", "resolve_conj", "resolve_neg",
})

PACKAGE_NAMESPACE_PREFIX = "opbot_"


def _folder(path: str) -> str:
    return str(Path(path).resolve().parent) + "/"


_TORCH_DIR = _folder(torch.__file__)
_STDLIB_FILES = {str(Path(contextlib.__file__).resolve()), contextlib.__file__}
_OWN_FILES = {str(Path(__file__).resolve()), __file__}


def _interpreter_file() -> str | None:
    # Found, not imported: TRITON_INTERPRET must be set before triton's first import.
    spec = importlib.util.find_spec("triton")
    if spec is None or spec.origin is None:
        return None
    return _folder(spec.origin) + "runtime/interpreter.py"


_INTERPRETER_FILE = _interpreter_file()


def _issued_by_interpreter(frame: FrameType | None) -> bool:
    """Whether the nearest caller outside torch (and this file) is the Triton interpreter,
    handing a launch's arguments to the host and back. Only there: C callables run from
    Triton's launcher (a grid's __len__) have no frame of their own, so "any Triton frame"
    would credit the candidate's compute to Triton."""
    depth = 0
    while frame is not None and depth < 200:
        filename = frame.f_code.co_filename
        if not (filename.startswith(_TORCH_DIR) or filename in _OWN_FILES
                or filename in _STDLIB_FILES):
            return filename == _INTERPRETER_FILE
        frame = frame.f_back
        depth += 1
    return False


def _package_op(func: Any) -> bool:
    name = str(getattr(func, "_qualified_op_name", "") or getattr(func, "namespace", ""))
    return name.startswith(PACKAGE_NAMESPACE_PREFIX)


class _FunctionRecorder(TorchFunctionMode):
    def __init__(self, computed: Counter[str], package_ops: bool) -> None:
        super().__init__()
        self.computed = computed
        self.package_ops = package_ops

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", None) or str(func)
        if name not in ALLOWED_CALLS and not (self.package_ops and _package_op(func)) and (
                not _issued_by_interpreter(sys._getframe(1))):
            self.computed[f"torch.{name}"] += 1
        return func(*args, **(kwargs or {}))


class _DispatchRecorder(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Every ATen operator, whoever calls it: the interpreter's own are all in ALLOWED_ATEN."""

    def __init__(self, computed: Counter[str], package_ops: bool) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.computed = computed
        self.package_ops = package_ops

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # True would import torch._dynamo when the class is made: seconds

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        packet = getattr(func, "overloadpacket", None)
        name = getattr(packet, "__name__", None) or str(func)
        # An Ascend C package's own operator (torch.ops.opbot_<op>) is the kernel itself.
        if name not in ALLOWED_ATEN and not (self.package_ops and _package_op(func)):
            self.computed[f"aten.{name}"] += 1
        return func(*args, **(kwargs or {}))


class ForwardGuard:
    """Watches forward calls: counts kernel launches, records PyTorch compute."""

    def __init__(self, *, package_ops: bool = False) -> None:
        self.launches = 0
        self.package_ops = package_ops  # the Ascend C backend: torch.ops.opbot_* is the kernel
        self._patched: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        """Wrap Triton's launch entry points (compiled and interpreted) to count launches."""
        try:
            from triton.runtime import jit
        except ImportError:
            return
        targets: list[Any] = [jit.JITFunction]
        try:
            from triton.runtime import interpreter
        except ImportError:
            interpreter = None
        if interpreter is not None:
            targets.append(interpreter.InterpretedFunction)
        for cls in targets:
            original = cls.__dict__.get("run")
            if original is None:
                continue
            cls.run = self._wrap(original)
            self._patched.append((cls, "run", original))

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        guard = self

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("warmup"):
                guard.launches += 1
            return original(self, *args, **kwargs)

        return run

    @contextmanager
    def watch(self) -> Iterator[Counter[str]]:
        """Record PyTorch compute for the duration; yields the counter it fills."""
        computed: Counter[str] = Counter()
        with ExitStack() as stack:
            stack.enter_context(_FunctionRecorder(computed, self.package_ops))
            stack.enter_context(_DispatchRecorder(computed, self.package_ops))
            yield computed


def snapshot(values: list[Any]) -> list[Any]:
    return [value.detach().clone() if isinstance(value, torch.Tensor) else value
            for value in values]


def mutated_inputs(before: list[Any], after: list[Any]) -> list[int]:
    """Indices of tensor inputs whose contents changed (NaN counts as equal to NaN)."""
    changed: list[int] = []
    for index, (old, new) in enumerate(zip(before, after, strict=False)):
        if not isinstance(old, torch.Tensor) or not isinstance(new, torch.Tensor):
            continue
        if old.shape != new.shape or old.dtype != new.dtype:
            changed.append(index)
            continue
        same = old == new
        if old.dtype.is_floating_point:
            same |= torch.isnan(old) & torch.isnan(new)
        if not bool(same.all()):
            changed.append(index)
    return changed
