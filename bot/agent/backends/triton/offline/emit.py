"""Triton expressions for IR nodes, evaluated at an index (one code string per dimension).

Every kernel the generator writes asks an Emitter for "the value of node N at index I";
the Emitter loads materialized buffers through their strides, inlines pointwise producers,
maps indices through views (permute, expand, reshape, slices), and keeps each value in a
local variable so a kernel computes it once. Kernel parameters (pointers, strides, sizes)
are registered as they are needed, each with the launcher expression that supplies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from bot.agent.backends.triton.offline.ops import pointwise_code
from bot.agent.backends.triton.offline.values import FLOAT, INT, Value, kind_of, literal
from bot.agent.offline.graph import Node, Size, UnsupportedGraphError, product
from bot.agent.offline.sizes import python_size

Index = tuple[str, ...]


@dataclass
class Emitter:
    """Writes one kernel's body; `materialized` maps nodes to the launcher's buffer names."""

    materialized: dict[Node, str]
    mask: str = "mask"
    lines: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    launch_args: list[str] = field(default_factory=list)
    helpers: set[str] = field(default_factory=set)
    virtual: dict[Node, Value] = field(default_factory=dict)
    _memo: dict[tuple[int, Index], Value] = field(default_factory=dict)
    _param_by_launch: dict[str, str] = field(default_factory=dict)
    _counter: int = 0

    # -- parameters ----------------------------------------------------------------------

    def param(self, stem: str, launch_expr: str) -> str:
        existing = self._param_by_launch.get(launch_expr)
        if existing is not None:
            return existing
        name = stem
        suffix = 0
        while name in self.params:
            suffix += 1
            name = f"{stem}_{suffix}"
        self.params.append(name)
        self.launch_args.append(launch_expr)
        self._param_by_launch[launch_expr] = name
        return name

    def size(self, expr: Size | int) -> str:
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return str(int(expr))
        return self.param(f"size{len(self.params)}", python_size(expr))

    def fresh(self, stem: str = "v") -> str:
        self._counter += 1
        return f"{stem}{self._counter}"

    def assign(self, code: str, kind: str, stem: str = "v") -> Value:
        name = self.fresh(stem)
        self.lines.append(f"{name} = {code}")
        return Value(name, kind)

    # -- values --------------------------------------------------------------------------

    def value(self, node: Node, index: Index) -> Value:
        if node in self.virtual:
            return self.virtual[node]
        key = (id(node), index)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if node in self.materialized or node.kind == "input":
            result = self._load(node, index)
        elif node.kind == "const":
            result = literal(_python_scalar(node.params["value"], node.dtype))
        elif node.kind == "view":
            result = self.value(node.args[0], self._view_index(node, index))
        elif node.kind == "pointwise":
            result = self._pointwise(node, index)
        elif node.kind == "iota":
            result = self._iota(node, index)
        elif node.kind == "gather":
            result = self._gather(node, index)
        else:
            raise UnsupportedGraphError([], f"{node.op} result {node.name} used before it is "
                                        "computed (internal planning error)")
        self._memo[key] = result
        return result

    def _load(self, node: Node, index: Index) -> Value:
        buffer = self.materialized.get(node, node.name)
        pointer = self.param(f"{node.name}_ptr", buffer)
        terms: list[str] = []
        for dim, (size, position) in enumerate(zip(node.shape, index, strict=True)):
            if position == "0" or (size.is_Integer and int(size) == 1):
                continue
            stride = self.param(f"{node.name}_stride{dim}", f"{buffer}.stride({dim})")
            terms.append(f"{position} * {stride}")
        kind = kind_of(node.dtype)
        if not terms:
            code = f"tl.load({pointer})"
        else:
            code = f"tl.load({pointer} + {' + '.join(terms)}, mask={self.mask}, other=0)"
        if kind == FLOAT:
            code += ".to(tl.float32)"
        return self.assign(code, kind, "x")

    def _iota(self, node: Node, index: Index) -> Value:
        start = self.operand(node.params["start"], node, index).code
        step = self.operand(node.params["step"], node, index).code
        kind = kind_of(node.dtype)
        code = f"({start} + {index[0]} * {step})"
        return self.assign(f"{code}.to(tl.float32)" if kind == FLOAT else code, kind)

    def _gather(self, node: Node, index: Index) -> Value:
        """gather: the source read where the index tensor says; embedding: rows by index."""
        source, indices = node.args[0], node.args[1]
        if node.op == "embedding":
            row = self.value(indices, index[:-1])
            return self.value(source, (f"{row.code}.to(tl.int64)", index[-1]))
        position = self.value(indices, index)
        mapped = list(index)
        mapped[node.params["dim"]] = f"{position.code}.to(tl.int64)"
        return self.value(source, tuple(mapped))

    # -- views ---------------------------------------------------------------------------

    def _view_index(self, node: Node, index: Index) -> Index:
        source: Node = node.args[0]
        op = node.op
        if op == "permute":
            dims: list[int] = node.params["dims"]
            mapped = ["0"] * source.rank
            for position, dim in enumerate(dims):
                mapped[dim] = index[position]
            return tuple(mapped)
        if op == "expand":
            return broadcast_index(index, node.shape, source.shape)
        if op == "broadcast_in_dim":
            bdims: list[int] = node.params["broadcast_dims"]
            return tuple("0" if _is_one(source.shape[j]) else index[bdims[j]]
                         for j in range(source.rank))
        if op == "slice":
            dim = node.params["dim"]
            start = self.size(node.params["start"])
            step = node.params["step"]
            mapped_list = list(index)
            mapped_list[dim] = f"({start} + {index[dim]} * {step})"
            return tuple(mapped_list)
        if op == "select":
            dim = node.params["dim"]
            mapped_list = list(index)
            mapped_list.insert(dim, self.size(node.params["index"]))
            return tuple(mapped_list)
        if op == "reshape":
            return self._reshape_index(index, node.shape, source.shape)
        if op == "as_strided":
            return self._strided_index(index, node, source.shape)
        raise UnsupportedGraphError([f"view {op}"])

    def _reshape_index(self, index: Index, out_shape: Sequence[Size],
                       in_shape: Sequence[Size]) -> Index:
        out_kept = [(pos, size) for pos, size in enumerate(out_shape) if not _is_one(size)]
        in_kept = [(pos, size) for pos, size in enumerate(in_shape) if not _is_one(size)]
        if [size for _, size in out_kept] == [size for _, size in in_kept]:
            # Only size-1 dims come or go: the other dims map in order.
            mapped = ["0"] * len(in_shape)
            for (out_pos, _), (in_pos, _) in zip(out_kept, in_kept, strict=True):
                mapped[in_pos] = index[out_pos]
            return tuple(mapped)
        flat_terms = []
        for dim in range(len(out_shape)):
            after = product(out_shape[dim + 1:])
            if index[dim] == "0":
                continue
            flat_terms.append(index[dim] if after == 1 else f"{index[dim]} * {self.size(after)}")
        flat = self.assign(" + ".join(flat_terms) or "0", INT, "flat").code
        return self._unflatten(flat, in_shape)

    def _unflatten(self, flat: str, shape: Sequence[Size]) -> Index:
        """The index of row-major position `flat` in a tensor of `shape`."""
        mapped: list[str] = []
        for dim, size in enumerate(shape):
            if _is_one(size):
                mapped.append("0")
                continue
            after = product(shape[dim + 1:])
            quotient = flat if after == 1 else f"({flat} // {self.size(after)})"
            mapped.append(quotient if dim == 0 else f"({quotient} % {self.size(size)})")
        return tuple(mapped)

    def _strided_index(self, index: Index, node: Node, in_shape: Sequence[Size]) -> Index:
        """as_strided over a value laid out contiguously: a flat position, then its index."""
        terms = [self.size(node.params["offset"])]
        for position, stride in zip(index, node.params["strides"], strict=True):
            if position != "0" and not (stride.is_Integer and int(stride) == 0):
                terms.append(f"{position} * {self.size(stride)}")
        flat = self.assign(" + ".join(terms), INT, "flat").code
        return self._unflatten(flat, in_shape)

    # -- pointwise -----------------------------------------------------------------------

    def operand(self, arg: Any, node: Node, index: Index) -> Value:
        if isinstance(arg, Node):
            return self.value(arg, broadcast_index(index, node.shape, arg.shape))
        if isinstance(arg, sympy.Expr):
            if arg.is_Number:
                return literal(int(arg) if arg.is_Integer else float(arg))
            return Value(self.size(arg), INT, literal=True)
        return literal(arg)

    def _pointwise(self, node: Node, index: Index) -> Value:
        operands = [None if arg is None else self.operand(arg, node, index) for arg in node.args]
        code = pointwise_code(node, operands, self.helpers)
        kind = kind_of(node.dtype)
        if all(item is None or item.literal for item in operands):
            return Value(f"({code})", kind, literal=True)
        return self.assign(code, kind)


def broadcast_index(index: Index, out_shape: Sequence[Size],
                    in_shape: Sequence[Size]) -> Index:
    """PyTorch broadcasting: right-aligned dims; a size-1 input dim reads index 0."""
    offset = len(out_shape) - len(in_shape)
    if offset < 0:
        raise UnsupportedGraphError([], "an operand has more dims than its result")
    mapped: list[str] = []
    for dim, size in enumerate(in_shape):
        out_size = out_shape[dim + offset]
        mapped.append("0" if _is_one(size) and not _is_one(out_size) else index[dim + offset])
    return tuple(mapped)


def _is_one(size: Size) -> bool:
    return bool(size.is_Integer and int(size) == 1)


def _python_scalar(value: Any, dtype: torch.dtype) -> Any:
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    return int(value)
