"""The work a reference does at one shape: the bytes it must move and the FLOPs it computes.

Bytes are the minimum traffic: every tensor the forward reads (its arguments and the
module's parameters and buffers) read once, every output written once, from shapes and
element sizes. No kernel can move less, so achieved GB/s against it is a lower bound.

FLOPs come from the aten operations one forward actually dispatches (a TorchDispatchMode
sees them after composite ops such as linear and matmul have decomposed):

- matmul family: mm, bmm 2*M*N*K; addmm, baddbmm the same plus one add per output
  element for the bias; mv, addmv, dot 2 per multiply-add.
- convolution and attention: torch.utils.flop_counter's formulas (2 per multiply-add; a
  convolution's bias add is not among them).
- elementwise (every aten op tagged pointwise: arithmetic, comparisons, exp/log/tanh and
  other transcendentals, activations such as relu, gelu, silu, sigmoid): 1 per output
  element per op, whatever the op costs in instructions.
- reductions (every aten op tagged reduction: sum, mean, amax, amin, argmax, prod...):
  1 per input element.
- softmax, norms and friends, per input element (per-row terms, such as one rsqrt or one
  log a row, are left out: rows are few next to elements, and the counts stay exact
  multiples of the input's size):
    softmax 5: row max, subtract, exp, row sum, divide;
    log_softmax 5: row max, subtract, exp, row sum, subtract the log of the sum;
    layer_norm, group_norm, batch_norm (training) 5: mean, subtract, square, sum,
      scale by the reciprocal deviation; +1 for a weight, +1 for a bias;
    batch_norm (running statistics) 2: subtract the mean, scale; +1 weight, +1 bias;
    rms_norm (fused) 3: square, sum, scale; +1 for a weight;
    var, std 4: mean, subtract, square, sum; vector norm 2: power, sum.
- data movement (views, copies, casts, cat, creation such as randn or zeros): 0.

An op none of these cover counts 0 and is named in `uncounted`, so a report can say that
its FLOPs are a lower bound. The module imports without a device; it runs wherever the
model's tensors live (CPU here, CUDA or NPU in the reference worker).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

_ATEN = torch.ops.aten


@dataclass(frozen=True)
class Work:
    """What one forward needs at one shape: minimum bytes, FLOPs, FLOPs per aten op."""

    bytes_moved: int
    flops: int
    by_op: dict[str, int] = field(default_factory=dict)
    uncounted: tuple[str, ...] = ()  # ops whose FLOPs no rule here covers (counted 0)


# Pointwise-tagged ops that only move data, and untagged ones that only move or make it.
_NO_FLOPS = frozenset({
    "clone", "copy", "copy_", "_to_copy", "to", "contiguous", "detach", "alias",
    "lift_fresh", "lift_fresh_copy", "fill", "fill_", "zero_", "view", "_unsafe_view",
    "reshape", "expand", "permute", "transpose", "t", "squeeze", "unsqueeze", "slice",
    "select", "as_strided", "split", "split_with_sizes", "unbind", "chunk", "narrow",
    "cat", "stack", "flatten", "unflatten", "index", "index_select", "gather", "scatter",
    "repeat", "flip", "roll", "pad", "constant_pad_nd", "empty", "empty_like",
    "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "randn", "rand", "randint", "arange", "new_empty", "new_zeros", "new_ones", "new_full",
    "_reshape_alias", "view_as", "expand_as", "set_", "resize_", "_local_scalar_dense",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size",
})

# Per input element; see the module docstring for why each count is what it is.
_SOFTMAX_PER_ELEMENT = 5
_NORM_PER_ELEMENT = 5
_RUNNING_NORM_PER_ELEMENT = 2
_RMS_PER_ELEMENT = 3
_VAR_PER_ELEMENT = 4
_VECTOR_NORM_PER_ELEMENT = 2


def _numel(value: Any) -> int:
    return value.numel() if isinstance(value, torch.Tensor) else 0


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else ()


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a nest of tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _bytes_once(tensors: Iterator[torch.Tensor]) -> int:
    """Each distinct tensor's bytes, once (a tensor passed twice is read once)."""
    seen: dict[int, int] = {}
    for tensor in tensors:
        seen.setdefault(id(tensor), tensor.numel() * tensor.element_size())
    return sum(seen.values())


def _first_output(out: Any) -> Any:
    return out[0] if isinstance(out, list | tuple) and out else out


def _matmul_flops(name: str, args: Sequence[Any], out: Any) -> int | None:
    """2 per multiply-add of the matmul family, plus the bias add; None: not one of them."""
    output = _first_output(out)
    if name in ("mm", "bmm"):
        return 2 * _numel(output) * _shape(args[0])[-1]
    if name in ("addmm", "baddbmm"):  # args: bias, a, b
        return 2 * _numel(output) * _shape(args[1])[-1] + _numel(output)
    if name == "mv":
        return 2 * _numel(args[0])
    if name == "addmv":  # args: bias, matrix, vector
        return 2 * _numel(args[1]) + _numel(output)
    if name == "dot":
        return 2 * _numel(args[0])
    return None


def _affine(args: Sequence[Any], weight_at: int, bias_at: int) -> int:
    """1 per element for a weight argument that is given, 1 for a bias."""
    given = 0
    for index in (weight_at, bias_at):
        if index < len(args) and isinstance(args[index], torch.Tensor):
            given += 1
    return given


def _norm_flops(name: str, args: Sequence[Any]) -> int | None:
    """Softmax, the norms, var/std and vector norms; None: not one of them."""
    size = _numel(args[0]) if args else 0
    if name in ("_softmax", "_log_softmax", "_safe_softmax"):
        return _SOFTMAX_PER_ELEMENT * size
    if name == "native_layer_norm":  # input, shape, weight, bias, eps
        return (_NORM_PER_ELEMENT + _affine(args, 2, 3)) * size
    if name == "native_group_norm":  # input, weight, bias, N, C, HxW, group, eps
        return (_NORM_PER_ELEMENT + _affine(args, 1, 2)) * size
    if name in ("native_batch_norm", "_native_batch_norm_legit",
                "_native_batch_norm_legit_no_training"):
        # input, weight, bias, running_mean, running_var, training, ...
        training = name == "_native_batch_norm_legit" or (
            name == "native_batch_norm" and len(args) > 5 and bool(args[5]))
        base = _NORM_PER_ELEMENT if training else _RUNNING_NORM_PER_ELEMENT
        return (base + _affine(args, 1, 2)) * size
    if name == "_fused_rms_norm":  # input, shape, weight, eps
        return (_RMS_PER_ELEMENT + _affine(args, 2, -1)) * size
    if name in ("var", "std", "var_mean", "std_mean"):
        return _VAR_PER_ELEMENT * size
    if name in ("linalg_vector_norm", "norm"):
        return _VECTOR_NORM_PER_ELEMENT * size
    return None


def _registry_flops(func: Any, args: Sequence[Any], kwargs: dict[str, Any],
                    out: Any) -> int | None:
    """torch.utils.flop_counter's formula (convolution, attention), called as its
    FlopCounterMode calls it; None where it has none."""
    formula = flop_registry.get(func.overloadpacket)
    if formula is None:
        return None
    return int(formula(*args, **kwargs, out_val=out))


def op_flops(func: Any, args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> int | None:
    """FLOPs of one dispatched aten op by the rules above; None: no rule covers it."""
    name = func.overloadpacket.__name__
    if name in _NO_FLOPS:
        return 0
    for counted in (_matmul_flops(name, args, out), _norm_flops(name, args)):
        if counted is not None:
            return counted
    from_registry = _registry_flops(func, args, kwargs, out)
    if from_registry is not None:
        return from_registry
    tags = set(func.tags)
    if torch.Tag.pointwise in tags:
        return sum(_numel(tensor) for tensor in _tensors(_first_output(out)))
    if torch.Tag.reduction in tags:
        return _numel(args[0]) if args else 0
    return None


class _CountingMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Adds up each dispatched op's FLOPs by name; remembers ops no rule covers."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.by_op: dict[str, int] = {}
        self.uncounted: dict[str, None] = {}  # insertion-ordered set

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        counted = op_flops(func, args, kwargs, out)
        name = func.overloadpacket.__name__
        if counted is None:
            self.uncounted[name] = None
        elif counted:
            self.by_op[name] = self.by_op.get(name, 0) + counted
        return out


def _module_tensors(model: Callable[..., Any]) -> Iterator[torch.Tensor]:
    if isinstance(model, torch.nn.Module):
        yield from model.parameters()
        yield from model.buffers()


def count_work(model: Callable[..., Any], values: Sequence[Any]) -> Work:
    """Run `model(*values)` once (no autograd) and count its work: minimum bytes (inputs,
    parameters and buffers read once, outputs written once) and FLOPs by op."""
    mode = _CountingMode()
    with torch.no_grad(), mode:
        outputs = model(*values)
    read = _bytes_once(_chain(_tensors(list(values)), _module_tensors(model)))
    written = _bytes_once(_tensors(outputs))
    flops = sum(mode.by_op.values())
    return Work(bytes_moved=read + written, flops=flops, by_op=dict(mode.by_op),
                uncounted=tuple(mode.uncounted))


def _chain(*parts: Iterator[torch.Tensor]) -> Iterator[torch.Tensor]:
    for part in parts:
        yield from part


def dtype_bytes(dtype: str) -> int:
    """Element size of a dtype by name ("float16", "torch.bfloat16"); ValueError if unknown."""
    name = dtype.removeprefix("torch.")
    found = getattr(torch, name, None)
    if not isinstance(found, torch.dtype):
        raise ValueError(f"not a torch dtype: {dtype!r}")
    return int(torch.empty((), dtype=found).element_size())


def shape_bytes(shapes: Sequence[Sequence[int]], dtypes: Sequence[str]) -> int:
    """Bytes of tensors given by shape and dtype name, each once."""
    return sum(math.prod(shape) * dtype_bytes(dtype) for shape, dtype in zip(shapes, dtypes,
                                                                              strict=True))
