"""Out-of-bounds loads and stores under Triton's CPU interpreter, caught before they happen.

On a GPU an unmasked access past a tensor's end reads garbage or faults. Under the
interpreter the kernel's pointers are host addresses: a store past the end writes into the
candidate process's own heap, which then aborts (a "crash" with no case), hangs in a broken
allocator until the verification's time limit, or silently changes other data. Here every
load, store and atomic a kernel issues is checked first: each address its mask enables must
lie inside the storage of a tensor the launch was given. The first one outside stops the
launch with the kernel's name, the program id and the offset, and the case fails as
`out_of_bounds`.

This runs in the candidate's own process, so a candidate can undo it (best effort, like the
guard); what it cannot do is make a wrong kernel pass: undone, the access corrupts memory as
before and the judge sees the crash, the hang or the wrong values.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

_state = threading.local()


class OutOfBoundsAccess(IndexError):
    """A kernel's load or store reached outside every tensor of its launch."""


@dataclass(frozen=True)
class Violation:
    kernel: str
    access: str  # load, store, atomic
    program: tuple[int, int, int]
    detail: str

    def message(self) -> str:
        return (f"out-of-bounds {self.access} in kernel `{self.kernel}` (program id "
                f"{self.program}): {self.detail}; every element a load or store enables must "
                "lie inside a tensor passed to the kernel (check the masks and the grid)")


class _Launch:
    """The storages one launch was given, as sorted [start, end) address ranges."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.starts = np.zeros(0, dtype=np.uint64)
        self.ends = np.zeros(0, dtype=np.uint64)
        # The kernel made a pointer out of an integer (a table of addresses, as grouped
        # GEMMs keep): what it reaches that way is not known here, so nothing is checked.
        self.raw_addresses = False

    def add(self, ranges: list[tuple[int, int]]) -> None:
        """Add storages; overlapping ones (a view's inside another) become one range, so
        that each address has one range to be checked against."""
        merged: list[list[int]] = []
        for start, end in sorted([*zip(self.starts.tolist(), self.ends.tolist(), strict=True),
                                  *ranges]):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.starts = np.array([start for start, _ in merged], dtype=np.uint64)
        self.ends = np.array([end for _, end in merged], dtype=np.uint64)

    def outside(self, addresses: np.ndarray, size: int) -> np.ndarray:
        """The addresses (uint64) whose `size` bytes are not within one storage."""
        if not len(self.starts):
            return addresses
        slot = np.searchsorted(self.starts, addresses, side="right").astype(np.int64) - 1
        inside = slot >= 0
        ends = self.ends[np.clip(slot, 0, None)]
        inside &= addresses + np.uint64(size) <= ends
        return addresses[~inside]


class BoundsChecker:
    """Installed once per candidate process; `violation` is the first one since `reset`."""

    def __init__(self) -> None:
        self.violation: Violation | None = None
        self._patched: list[tuple[Any, str, Any]] = []

    def reset(self) -> None:
        self.violation = None

    def install(self) -> bool:
        """Patch the interpreter's launcher and memory operations; False without Triton."""
        try:
            from triton.runtime import interpreter
        except ImportError:
            return False
        executor, builder = interpreter.GridExecutor, interpreter.InterpreterBuilder
        self._patch(executor, "__call__", self._wrap_launch)
        self._patch(executor, "_init_args_hst", self._wrap_arguments)
        # Every memory path of the interpreter ends in one of these (plain loads and
        # stores, block pointers and descriptors go through the masked pair).
        self._patch(builder, "create_masked_load",
                    self._wrap_access("load", (0, "ptrs"), (1, "mask")))
        self._patch(builder, "create_masked_store",
                    self._wrap_access("store", (0, "ptrs"), (2, "mask")))
        self._patch(builder, "create_atomic_rmw",
                    self._wrap_access("atomic", (1, "ptr"), (3, "mask")))
        self._patch(builder, "create_atomic_cas", self._wrap_access("atomic", (0, "ptr"), None))
        self._patch(builder, "create_int_to_ptr", self._wrap_cast)
        self._patch(builder, "create_bitcast", self._wrap_cast)
        return True

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)
        self._patched.clear()

    def _patch(self, owner: Any, name: str, wrapper: Callable[[Any], Any]) -> None:
        original = owner.__dict__.get(name)
        if original is None:
            return
        setattr(owner, name, wrapper(original))
        self._patched.append((owner, name, original))

    def _wrap_launch(self, original: Any) -> Any:
        def launch(executor: Any, *args: Any, **kwargs: Any) -> Any:
            name = getattr(getattr(executor, "fn", None), "__name__", "kernel")
            stack = _launches()
            stack.append(_Launch(str(name)))
            try:
                return original(executor, *args, **kwargs)
            finally:
                stack.pop()
        return launch

    def _wrap_arguments(self, original: Any) -> Any:
        def arguments(executor: Any, args_dev: Any, kwargs: Any) -> Any:
            args_hst, kwargs_hst = original(executor, args_dev, kwargs)
            stack = _launches()
            if stack:
                stack[-1].add(list(_storage_ranges([*args_hst, *kwargs_hst.values()])))
            return args_hst, kwargs_hst
        return arguments

    def _wrap_cast(self, original: Any) -> Any:
        def cast(builder: Any, source: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
            stack = _launches()
            if stack and _is_pointer_type(target):
                stack[-1].raw_addresses = True
            return original(builder, source, target, *args, **kwargs)
        return cast

    def _wrap_access(self, access: str, pointer: tuple[int, str],
                     mask: tuple[int, str] | None) -> Callable[[Any], Any]:
        """A wrapper for a memory operation whose pointers (and mask) are the arguments
        at these positions, or by these names."""
        def wrap(original: Any) -> Any:
            def checked(builder: Any, *args: Any, **kwargs: Any) -> Any:
                stack = _launches()
                if stack:
                    self._check(builder, stack[-1], access, _argument(args, kwargs, pointer),
                                None if mask is None else _argument(args, kwargs, mask))
                return original(builder, *args, **kwargs)
            return checked
        return wrap

    def _check(self, builder: Any, launch: _Launch, access: str, pointers: Any,
               mask: Any) -> None:
        if pointers is None or launch.raw_addresses:
            return
        addresses = np.asarray(pointers.data)
        if addresses.dtype.kind not in "iu":
            return  # not an address array: nothing this check understands
        addresses = addresses.astype(np.uint64, copy=False)
        if mask is not None:
            enabled = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
            addresses = addresses[enabled]
        else:
            addresses = addresses.reshape(-1)
        if not addresses.size:
            return
        size = _element_size(pointers)
        outside = launch.outside(addresses, size)
        if not outside.size:
            return
        violation = Violation(kernel=launch.kernel, access=access,
                              program=_program_id(builder),
                              detail=_describe(launch, outside, addresses.size))
        if self.violation is None:
            self.violation = violation
        raise OutOfBoundsAccess(violation.message())


def _launches() -> list[_Launch]:
    stack: list[_Launch] | None = getattr(_state, "launches", None)
    if stack is None:
        stack = []
        _state.launches = stack
    return stack


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], where: tuple[int, str]) -> Any:
    index, name = where
    return args[index] if index < len(args) else kwargs.get(name)


def _storage_ranges(values: list[Any]) -> Iterator[tuple[int, int]]:
    """[start, end) of every tensor storage among the launch's arguments (tuples and tensor
    descriptors opened). Only real tensors, read through torch's own method: an argument
    of the candidate's making could claim any range."""
    import torch

    pending = list(values)
    while pending:
        value = pending.pop()
        if isinstance(value, tuple):
            pending.extend(value)
            continue
        if not isinstance(value, torch.Tensor):
            base = getattr(type(value), "__name__", "") == "TensorDescriptor" and \
                getattr(value, "base", None)
            if isinstance(base, torch.Tensor):
                pending.append(base)
            continue
        try:
            with torch._C.DisableTorchFunctionSubclass():
                storage = torch.Tensor.untyped_storage(value)
                start, length = int(storage.data_ptr()), int(storage.nbytes())
        except (RuntimeError, NotImplementedError, TypeError):
            continue  # a wrapper subclass without storage: nothing it could be given
        if length:
            yield start, start + length


def _is_pointer_type(target: Any) -> bool:
    try:
        import triton.language as tl
    except ImportError:
        return False
    return isinstance(target, tl.pointer_type) or isinstance(
        getattr(target, "scalar", None), tl.pointer_type)


def _element_size(pointers: Any) -> int:
    try:
        from triton.runtime.interpreter import _get_np_dtype

        return int(np.dtype(_get_np_dtype(pointers.get_element_ty())).itemsize)
    except Exception:  # noqa: BLE001 - an unusual pointer type: check the first byte only
        return 1


def _program_id(builder: Any) -> tuple[int, int, int]:
    index = getattr(builder, "grid_idx", None)
    try:
        x, y, z = (int(part) for part in index)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return (0, 0, 0)
    return (x, y, z)


def _describe(launch: _Launch, outside: np.ndarray, enabled: int) -> str:
    first = int(outside[0])
    nearest = ""
    if len(launch.ends):
        below = launch.ends[launch.ends <= np.uint64(first)]
        if below.size:
            nearest = f", {first - int(below.max())} bytes past the end of a tensor"
        else:
            nearest = f", {int(launch.starts.min()) - first} bytes before the first tensor"
    return f"{outside.size} of the {enabled} elements it enabled are outside{nearest}"
