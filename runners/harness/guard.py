"""Run-time anti-cheat: what a candidate's forward really does with PyTorch.

While the forward runs, a TorchFunctionMode records every PyTorch function or tensor method
the candidate's Python code calls outside the backend's kernel launches. Allocation, views,
copies and metadata are fine (a wrapper must allocate outputs and reshape); anything that
computes (add, exp, matmul, sum, softmax, F.linear...) means PyTorch, not the kernel, did
the work. Kernel launches are counted too: a forward that launches none computed nothing.
(A TorchDispatchMode would see ATen ops, but entering one imports torch._dynamo: seconds.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

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
    "get_default_dtype", "broadcast_shapes", "is_same_size", "get_device", "__dlpack__",
    "__dlpack_device__", "__array__", "__cuda_array_interface__",
})


class _Recorder(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.computed: Counter[str] = Counter()
        self.paused = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        if not self.paused:
            name = getattr(func, "__name__", None) or str(func)
            if name not in ALLOWED_CALLS:
                self.computed[f"torch.{name}"] += 1
        return func(*args, **(kwargs or {}))


class ForwardGuard:
    """Watches forward calls: counts kernel launches, records PyTorch compute outside them."""

    def __init__(self) -> None:
        self.launches = 0
        self._recorder: _Recorder | None = None
        self._patched: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        """Wrap Triton's launch entry points (compiled and interpreted) to count and bracket."""
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
            if kwargs.get("warmup"):
                return original(self, *args, **kwargs)
            guard.launches += 1
            recorder = guard._recorder
            if recorder is not None:
                recorder.paused += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                if recorder is not None:
                    recorder.paused -= 1

        return run

    @contextmanager
    def watch(self) -> Iterator[_Recorder]:
        recorder = _Recorder()
        self._recorder = recorder
        try:
            with recorder:
                yield recorder
        finally:
            self._recorder = None


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
