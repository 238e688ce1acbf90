"""Worker side of the wire format: torch values to value trees and back, and input layouts.

A layout says how an input is laid out in memory when the forward sees it: `contiguous`,
`transposed` (its last two dimensions stored swapped, so it is a transposed view) or
`strided` (every other element of a buffer twice its size along the last dimension, a
slice). Both workers build views the same way from the same values, so the reference and
the candidate see the same strides.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from runners.harness.inputs import DTYPES, dtype_name
from runners.harness.wire import NUMPY_DTYPES, WireError, WireTensor

Layout = Literal["contiguous", "transposed", "strided"]
LAYOUTS: tuple[Layout, ...] = ("contiguous", "transposed", "strided")


def to_wire(tensor: torch.Tensor) -> WireTensor:
    """A tensor's values (moved to the CPU, C order) and its device and layout facts."""
    name = dtype_name(tensor.dtype)
    if name not in NUMPY_DTYPES:
        raise WireError(f"a tensor of dtype {name} cannot be sent")
    meta = {"device": tensor.device.type, "stride": list(tensor.stride()),
            "dense": is_dense(tensor), "subclass": type(tensor) is not torch.Tensor}
    values = tensor.detach()
    if type(values) is not torch.Tensor:
        values = values.as_subclass(torch.Tensor)
    values = values.to("cpu").contiguous()
    if values.dtype == torch.bfloat16:
        values = values.view(torch.int16)
    data = values.numpy().tobytes() if values.numel() else b""
    return WireTensor(dtype=name, shape=list(tensor.shape), data=data, meta=meta)


def from_wire(item: WireTensor) -> torch.Tensor:
    """A CPU tensor holding the values of `item` (a fresh, writable copy)."""
    dtype = DTYPES[item.dtype]
    storage_dtype = torch.int16 if dtype == torch.bfloat16 else dtype
    if not item.data:
        return torch.empty(item.shape, dtype=dtype)
    flat = torch.frombuffer(bytearray(item.data), dtype=storage_dtype)
    values = flat.reshape(item.shape)
    return values.view(torch.bfloat16) if dtype == torch.bfloat16 else values


def is_dense(tensor: torch.Tensor) -> bool:
    """No two elements share memory and no gaps: what any freshly allocated output is."""
    if tensor.numel() <= 1:
        return True
    pairs = sorted((stride, size) for size, stride in zip(tensor.shape, tensor.stride(),
                                                          strict=True) if size != 1)
    expected = 1
    for stride, size in pairs:
        if stride != expected:
            return False
        expected *= size
    return True


def encode_tree(value: Any, tensors: list[WireTensor]) -> dict[str, Any]:
    """A value tree for `value`; its tensors are appended to `tensors`."""
    if isinstance(value, torch.Tensor):
        tensors.append(to_wire(value))
        return {"t": "tensor", "i": len(tensors) - 1}
    if isinstance(value, (list, tuple)):
        return {"t": "tuple" if isinstance(value, tuple) else "list",
                "items": [encode_tree(item, tensors) for item in value]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"t": "value", "v": value if not isinstance(value, float)
                or (value == value and abs(value) != float("inf")) else repr(value)}
    return {"t": "value", "v": f"<{type(value).__name__}>"}


def decode_tree(tree: Any, tensors: list[WireTensor]) -> Any:
    """The values a tree describes, tensors as CPU torch tensors."""
    kind = tree.get("t") if isinstance(tree, dict) else None
    if kind == "tensor":
        return from_wire(tensors[int(tree["i"])])
    if kind in ("list", "tuple"):
        items = [decode_tree(item, tensors) for item in tree["items"]]
        return tuple(items) if kind == "tuple" else items
    if kind == "value":
        return tree.get("v")
    raise WireError("a malformed value tree")


def with_layout(tensor: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values as `tensor`, laid out as `layout` says (a view into a new buffer)."""
    if layout == "transposed" and tensor.dim() >= 2:
        return tensor.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "strided" and tensor.dim() >= 1 and tensor.shape[-1] > 0:
        wide = torch.zeros((*tensor.shape[:-1], tensor.shape[-1] * 2), dtype=tensor.dtype)
        wide[..., ::2] = tensor
        return wide[..., ::2]
    return tensor.contiguous()


def layout_for(tensor: torch.Tensor) -> Layout:
    """The non-contiguous layout that fits this input: a transpose, else a slice."""
    if tensor.dim() >= 2 and tensor.shape[-1] > 1 and tensor.shape[-2] > 1:
        return "transposed"
    if tensor.dim() >= 1 and tensor.shape[-1] > 1:
        return "strided"
    return "contiguous"


def place(values: list[Any], layouts: list[str], device: str) -> list[Any]:
    """Inputs on `device`, each tensor with its layout (views keep their strides there)."""
    placed: list[Any] = []
    for value, layout in zip(values, layouts, strict=True):
        if isinstance(value, torch.Tensor):
            shaped = with_layout(value, layout)
            if device != "cpu":
                shaped = _to_device_keeping_strides(shaped, device)
            placed.append(shaped)
        else:
            placed.append(value)
    return placed


def _to_device_keeping_strides(view: torch.Tensor, device: str) -> torch.Tensor:
    if view.is_contiguous():
        return view.to(device)
    base = view._base if view._base is not None else view
    moved = base.to(device)
    return moved.as_strided(view.shape, view.stride(), view.storage_offset())
