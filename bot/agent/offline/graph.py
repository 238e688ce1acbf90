"""The reference's exported ATen graph, lowered to a small IR the code generator understands.

torch.export traces the reference with symbolic sizes (Dim.AUTO), so the generated kernel
works for any shape the reference accepts, not just the traced one; decompositions reduce
the zoo of PyTorch ops (softmax, layer_norm, gelu, mse_loss, norms...) to a few dozen
pointwise ops, reductions, views and matmuls. Every node of the IR is one of those four
kinds; any ATen op outside them makes the whole reference `unsupported`, naming the op.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import sympy
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

aten = torch.ops.aten
prims = torch.ops.prims

Size: TypeAlias = sympy.Expr


class UnsupportedGraphError(Exception):
    """The reference uses ops the offline generator cannot lower; lists them."""

    def __init__(self, ops: Sequence[str], reason: str = "") -> None:
        self.ops = sorted(set(ops))
        self.reason = reason
        text = reason or f"unsupported ops: {', '.join(self.ops)}"
        super().__init__(text)


@dataclass(eq=False)
class Node:
    """One value of the IR. `kind` says how it is computed:

    - input: a forward argument, parameter, buffer or constant tensor (`source` says which);
    - const: a scalar everywhere (`params['value']`);
    - pointwise: `op` over `args` (Nodes or Python scalars), broadcasting like PyTorch;
    - view: `op` in permute/expand/reshape/... over args[0], no data touched;
    - reduce: `op` in sum/amax/amin/argmax/argmin/prod over `params['dims']` of args[0];
    - matmul: args[0] @ args[1] (2D, or batched 3D).
    """

    name: str
    kind: str
    op: str
    args: list[Any]
    shape: tuple[Size, ...]
    dtype: torch.dtype
    params: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # inputs: "user:<index>" or "attr:<dotted.path>"
    users: list[Node] = field(default_factory=list)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def tensor_args(self) -> list[Node]:
        return [arg for arg in self.args if isinstance(arg, Node)]


@dataclass
class Graph:
    nodes: list[Node]
    inputs: list[Node]  # user inputs, in forward order (tensors only)
    attributes: list[Node]  # parameters, buffers, constants
    outputs: list[Node]
    output_is_tuple: bool
    output_container: str  # "tensor" | "tuple" | "list"
    user_input_names: list[str]
    user_input_constants: dict[int, Any]  # non-tensor forward arguments, as traced


# --- pointwise op table: ATen target -> IR op name ---------------------------------------

_POINTWISE: dict[Any, str] = {}


def _register(op_name: str, *targets: Any) -> None:
    for target in targets:
        _POINTWISE[target] = op_name


_register("add", aten.add.Tensor, aten.add.Scalar, prims.add.default)
_register("sub", aten.sub.Tensor, aten.sub.Scalar, prims.sub.default)
_register("rsub", aten.rsub.Tensor, aten.rsub.Scalar)
_register("mul", aten.mul.Tensor, aten.mul.Scalar, prims.mul.default)
_register("div", aten.div.Tensor, aten.div.Scalar, prims.div.default)
_register("div_mode", aten.div.Tensor_mode, aten.div.Scalar_mode)
_register("neg", aten.neg.default, prims.neg.default)
_register("abs", aten.abs.default, prims.abs.default)
_register("exp", aten.exp.default, prims.exp.default)
_register("exp2", aten.exp2.default)
_register("expm1", aten.expm1.default, prims.expm1.default)
_register("log", aten.log.default, prims.log.default)
_register("log2", aten.log2.default)
_register("log10", aten.log10.default)
_register("log1p", aten.log1p.default, prims.log1p.default)
_register("sqrt", aten.sqrt.default, prims.sqrt.default)
_register("rsqrt", aten.rsqrt.default, prims.rsqrt.default)
_register("reciprocal", aten.reciprocal.default, prims.reciprocal.default)
_register("sin", aten.sin.default, prims.sin.default)
_register("cos", aten.cos.default, prims.cos.default)
_register("tanh", aten.tanh.default, prims.tanh.default)
_register("sigmoid", aten.sigmoid.default)
_register("erf", aten.erf.default, prims.erf.default)
_register("relu", aten.relu.default)
_register("gelu", aten.gelu.default)
_register("silu", aten.silu.default)
_register("sign", aten.sign.default, aten.sgn.default, prims.sign.default)
_register("floor", aten.floor.default, prims.floor.default)
_register("ceil", aten.ceil.default, prims.ceil.default)
_register("trunc", aten.trunc.default, prims.trunc.default)
_register("pow", aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar,
          prims.pow.default)
_register("clamp", aten.clamp.default, aten.clamp.Tensor)
_register("clamp_min", aten.clamp_min.default, aten.clamp_min.Tensor)
_register("clamp_max", aten.clamp_max.default, aten.clamp_max.Tensor)
_register("maximum", aten.maximum.default, prims.maximum.default, aten.fmax.default)
_register("minimum", aten.minimum.default, prims.minimum.default, aten.fmin.default)
_register("where", aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther,
          aten.where.Scalar, prims.where.default)
_register("gt", aten.gt.Tensor, aten.gt.Scalar, prims.gt.default)
_register("ge", aten.ge.Tensor, aten.ge.Scalar, prims.ge.default)
_register("lt", aten.lt.Tensor, aten.lt.Scalar, prims.lt.default)
_register("le", aten.le.Tensor, aten.le.Scalar, prims.le.default)
_register("eq", aten.eq.Tensor, aten.eq.Scalar, prims.eq.default)
_register("ne", aten.ne.Tensor, aten.ne.Scalar, prims.ne.default)
_register("logical_and", aten.logical_and.default)
_register("logical_or", aten.logical_or.default)
_register("logical_xor", aten.logical_xor.default)
_register("logical_not", aten.logical_not.default, aten.bitwise_not.default)
_register("isnan", aten.isnan.default)
_register("isinf", aten.isinf.default)
_register("fmod", aten.fmod.Tensor, aten.fmod.Scalar, prims.fmod.default)
_register("remainder", aten.remainder.Tensor, aten.remainder.Scalar, prims.remainder.default)

_IDENTITY = {aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default,
             aten.contiguous.default, aten.detach.default}
_VIEWS = {
    aten.view.default: "reshape", aten._unsafe_view.default: "reshape",
    aten.reshape.default: "reshape", prims.reshape.default: "reshape",
    aten.permute.default: "permute", prims.transpose.default: "permute",
    aten.t.default: "t", aten.transpose.int: "transpose",
    aten.expand.default: "expand", prims.broadcast_in_dim.default: "broadcast_in_dim",
    aten.unsqueeze.default: "reshape", aten.squeeze.dim: "reshape",
    aten.squeeze.dims: "reshape", aten.squeeze.default: "reshape",
    prims.squeeze.default: "reshape", aten.slice.Tensor: "slice", aten.select.int: "select",
}
_REDUCTIONS = {
    aten.sum.dim_IntList: "sum", aten.sum.default: "sum", prims.sum.default: "sum",
    aten.mean.dim: "mean", aten.mean.default: "mean",
    aten.amax.default: "amax", prims.amax.default: "amax",
    aten.amin.default: "amin", prims.amin.default: "amin",
    aten.max.default: "amax", aten.min.default: "amin",
    aten.argmax.default: "argmax", aten.argmin.default: "argmin",
    aten.prod.dim_int: "prod", aten.prod.default: "prod",
    aten.any.dim: "any", aten.any.dims: "any", aten.any.default: "any",
    aten.all.dim: "all", aten.all.default: "all",
}
_VARIANCES = {aten.var.correction: "var", prims.var.default: "var",
              aten.std.correction: "std", aten.var.dim: "var", aten.std.dim: "std"}
_MATMULS = {aten.mm.default: "mm", aten.bmm.default: "bmm"}
_SIZE_OPS = {aten.sym_size.int, aten.sym_numel.default, aten.sym_stride.int,
             operator.mul, operator.add, operator.sub, operator.floordiv, operator.mod,
             operator.neg, operator.truediv, torch.sym_int, torch.sym_float, torch.sym_max,
             torch.sym_min}


# Run-time assertions export inserts (dtype, device, size checks): no value to compute.
_ASSERTIONS = {getattr(aten, name).default for name in (
    "_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size",
    "sym_constrain_range", "_assert_async") if hasattr(aten, name)}


def _size(value: Any) -> Size:
    if isinstance(value, torch.SymInt):
        return sympy.sympify(value.node.expr)
    return sympy.Integer(int(value))


def _meta(node: torch.fx.Node) -> Any:
    return node.meta.get("val")


def _shape_of(value: Any) -> tuple[Size, ...]:
    return tuple(_size(size) for size in value.shape)


class _Lowering:
    """Walks the exported graph once, building IR nodes."""

    def __init__(self, program: ExportedProgram) -> None:
        self.program = program
        self.nodes: list[Node] = []
        self.by_fx: dict[torch.fx.Node, Any] = {}
        self.unsupported: list[str] = []
        self.counter = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        clean = "".join(ch if ch.isalnum() else "_" for ch in stem).strip("_") or "v"
        return f"{clean}_{self.counter}"

    def add(self, kind: str, op: str, args: list[Any], shape: Sequence[Size],
            dtype: torch.dtype, **params: Any) -> Node:
        node = Node(name=self.fresh(op), kind=kind, op=op, args=args, shape=tuple(shape),
                    dtype=dtype, params=params)
        for arg in node.tensor_args():
            arg.users.append(node)
        self.nodes.append(node)
        return node

    # -- inputs -------------------------------------------------------------------------

    def placeholders(self) -> tuple[list[Node], list[Node], list[str], dict[int, Any]]:
        specs = {spec.arg.name: spec for spec in self.program.graph_signature.input_specs
                 if hasattr(spec.arg, "name")}
        user_inputs: list[Node] = []
        attributes: list[Node] = []
        names: list[str] = []
        constants: dict[int, Any] = {}
        user_index = 0
        for fx_node in self.program.graph.nodes:
            if fx_node.op != "placeholder":
                continue
            spec = specs.get(fx_node.name)
            value = _meta(fx_node)
            if spec is not None and spec.kind == InputKind.USER_INPUT:
                names.append(fx_node.name)
                if not isinstance(value, torch.Tensor):
                    constants[user_index] = value
                    self.by_fx[fx_node] = value
                else:
                    node = Node(name=fx_node.name, kind="input", op="input", args=[],
                                shape=_shape_of(value), dtype=value.dtype,
                                source=f"user:{user_index}")
                    user_inputs.append(node)
                    self.nodes.append(node)
                    self.by_fx[fx_node] = node
                user_index += 1
                continue
            target = spec.target if spec is not None else None
            if not isinstance(value, torch.Tensor) or target is None:
                raise UnsupportedGraphError([], f"input {fx_node.name} is not a tensor")
            node = Node(name=fx_node.name, kind="input", op="input", args=[],
                        shape=_shape_of(value), dtype=value.dtype, source=f"attr:{target}")
            attributes.append(node)
            self.nodes.append(node)
            self.by_fx[fx_node] = node
        return user_inputs, attributes, names, constants

    # -- ops ----------------------------------------------------------------------------

    def lower(self, fx_node: torch.fx.Node) -> None:
        target = fx_node.target
        if target in _SIZE_OPS or target in _ASSERTIONS:
            return  # sizes come from each node's symbolic shape; asserts compute nothing
        value = _meta(fx_node)
        args = [self.arg(item) for item in fx_node.args]
        kwargs = {key: self.arg(item) for key, item in fx_node.kwargs.items()}
        if _unresolved(args) or _unresolved(list(kwargs.values())):
            return  # an operand's producer is unsupported: that op is the one to report
        handler = self._handler(target)
        if handler is None:
            self.unsupported.append(str(target))
            return
        result = handler(target, args, kwargs, value)
        if result is not None:
            self.by_fx[fx_node] = result

    def _handler(self, target: Any) -> Callable[..., Any] | None:
        if target in _POINTWISE:
            return self.pointwise
        if target in _IDENTITY:
            return lambda _t, args, _k, _v: args[0]
        if target in _VIEWS:
            return self.view
        if target in _REDUCTIONS:
            return self.reduction
        if target in _VARIANCES:
            return self.variance
        if target in _MATMULS:
            return self.matmul
        handlers: dict[Any, Callable[..., Any]] = {
            aten.addmm.default: self.addmm,
            aten.max.dim: self.max_min_dim, aten.min.dim: self.max_min_dim,
            operator.getitem: self.getitem,
            aten._to_copy.default: self.cast,
            prims.convert_element_type.default: self.cast,
            aten.full.default: self.full, aten.scalar_tensor.default: self.full,
            aten.full_like.default: self.full,
            aten.hardtanh.default: self.hardtanh,
            aten.arange.default: self.iota, aten.arange.start: self.iota,
            aten.arange.start_step: self.iota, prims.iota.default: self.iota,
            aten.gather.default: self.gather,
            aten.embedding.default: self.embedding,
            aten.native_dropout.default: self.dropout,
            aten.as_strided.default: self.as_strided,
        }
        return handlers.get(target)

    def arg(self, item: Any) -> Any:
        if isinstance(item, torch.fx.Node):
            if item in self.by_fx:
                return self.by_fx[item]
            value = _meta(item)
            if isinstance(value, (torch.SymInt, torch.SymFloat)):
                return sympy.sympify(value.node.expr)  # a size computed in the graph
            if isinstance(value, (int, float)):
                return value
            return item
        if isinstance(item, (list, tuple)):
            return type(item)(self.arg(sub) for sub in item)
        return item

    def _check_nodes(self, args: Sequence[Any]) -> bool:
        return not any(isinstance(arg, torch.fx.Node) for arg in args)

    def iota(self, target: Any, args: list[Any], kwargs: dict[str, Any], value: Any) -> Any:
        """arange/iota: the value is start + index * step, computed from the index."""
        if target == prims.iota.default:
            start, step = kwargs.get("start", 0), kwargs.get("step", 1)
        elif target == aten.arange.default:
            start, step = 0, 1
        else:
            start = args[0]
            step = args[2] if len(args) > 2 else kwargs.get("step", 1)
        if any(isinstance(item, torch.fx.Node) for item in (start, step)):
            self.unsupported.append(f"{target} (computed bounds)")
            return None
        return self.add("iota", "iota", [], _shape_of(value), value.dtype, start=start,
                        step=step)

    def gather(self, target: Any, args: list[Any], kwargs: dict[str, Any], value: Any) -> Any:
        source, dim, index = args[0], args[1], args[2]
        if not isinstance(source, Node) or not isinstance(index, Node):
            return None
        return self.add("gather", "gather", [source, index], _shape_of(value), value.dtype,
                        dim=int(dim) % max(source.rank, 1))

    def embedding(self, target: Any, args: list[Any], kwargs: dict[str, Any],
                  value: Any) -> Any:
        weight, indices = args[0], args[1]
        if not isinstance(weight, Node) or not isinstance(indices, Node) or weight.rank != 2:
            return None
        return self.add("gather", "embedding", [weight, indices], _shape_of(value),
                        value.dtype)

    def dropout(self, target: Any, args: list[Any], kwargs: dict[str, Any], value: Any) -> Any:
        probability = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
        train = args[2] if len(args) > 2 else kwargs.get("train", True)
        source = args[0]
        if not isinstance(source, Node):
            return None
        if train and probability not in (0, 0.0):
            self.unsupported.append(f"{target} (random in training mode, p={probability})")
            return None
        mask = self.add("const", "const", [], source.shape, torch.bool, value=True)
        return source, mask

    def as_strided(self, target: Any, args: list[Any], kwargs: dict[str, Any],
                   value: Any) -> Any:
        source = args[0]
        if not isinstance(source, Node):
            return None
        strides = args[2]
        offset = args[3] if len(args) > 3 and args[3] is not None else 0
        return self.add("view", "as_strided", [source], _shape_of(value), value.dtype,
                        strides=[_size(stride) for stride in strides], offset=_size(offset))

    def getitem(self, target: Any, args: list[Any], kwargs: dict[str, Any], value: Any) -> Any:
        if isinstance(args[0], (tuple, list)):
            return args[0][args[1]]
        return None  # an item of an op already reported unsupported

    def pointwise(self, target: Any, args: list[Any], kwargs: dict[str, Any],
                  value: Any) -> Node | None:
        op = _POINTWISE[target]
        params: dict[str, Any] = {}
        if op in ("add", "sub", "rsub") and kwargs.get("alpha") not in (None, 1):
            params["alpha"] = kwargs["alpha"]
        if op == "div_mode":
            params["rounding_mode"] = kwargs.get("rounding_mode")
        if op == "gelu":
            params["approximate"] = kwargs.get("approximate", "none")
        if op == "clamp":
            args = args + [kwargs.get("min"), kwargs.get("max")][len(args) - 1:]
        if not self._check_nodes(args):
            return None  # an operand's producer is unsupported and already reported
        if not isinstance(value, torch.Tensor):
            self.unsupported.append(str(target))
            return None
        return self.add("pointwise", op, list(args), _shape_of(value), value.dtype, **params)

    def hardtanh(self, _target: Any, args: list[Any], _kwargs: dict[str, Any],
                 value: Any) -> Node:
        low = args[1] if len(args) > 1 else -1.0
        high = args[2] if len(args) > 2 else 1.0
        return self.add("pointwise", "clamp", [args[0], low, high], _shape_of(value),
                        value.dtype)

    def cast(self, target: Any, args: list[Any], kwargs: dict[str, Any], value: Any) -> Any:
        source = args[0]
        if not isinstance(source, Node):
            self.unsupported.append(str(target))
            return None
        if value.dtype == source.dtype:
            return source
        return self.add("pointwise", "cast", [source], _shape_of(value), value.dtype)

    def full(self, target: Any, args: list[Any], kwargs: dict[str, Any], value: Any) -> Node:
        fill = args[1] if target in (aten.full.default, aten.full_like.default) else args[0]
        if isinstance(fill, Node):
            self.unsupported.append(str(target))
        return self.add("const", "const", [], _shape_of(value), value.dtype,
                        value=fill if not isinstance(fill, Node) else 0)

    def view(self, target: Any, args: list[Any], kwargs: dict[str, Any], value: Any) -> Any:
        op = _VIEWS[target]
        source = args[0]
        if not isinstance(source, Node):
            self.unsupported.append(str(target))
            return None
        shape = _shape_of(value)
        params: dict[str, Any] = {}
        if op == "permute":
            params["dims"] = [int(dim) % max(source.rank, 1) for dim in args[1]]
        elif op == "t":
            op, params["dims"] = "permute", list(range(source.rank))[::-1]
        elif op == "transpose":
            dims = list(range(source.rank))
            first, second = int(args[1]) % source.rank, int(args[2]) % source.rank
            dims[first], dims[second] = dims[second], dims[first]
            op, params["dims"] = "permute", dims
        elif op == "broadcast_in_dim":
            params["broadcast_dims"] = [int(dim) for dim in args[2]]
        elif op == "slice":
            dim = int(args[1]) if len(args) > 1 else 0
            start = args[2] if len(args) > 2 and args[2] is not None else 0
            step = args[4] if len(args) > 4 else 1
            if not isinstance(start, int) or not isinstance(step, int):
                self.unsupported.append(f"{target} (symbolic bounds)")
                return None
            dim %= source.rank
            if start < 0:
                start = source.shape[dim] + start
            params.update(dim=dim, start=_size(start) if isinstance(start, int) else start,
                          step=step)
        elif op == "select":
            dim = int(args[1]) % source.rank
            index = args[2]
            if not isinstance(index, int):
                self.unsupported.append(f"{target} (symbolic index)")
                return None
            params.update(dim=dim, index=_size(index) if index >= 0
                          else source.shape[dim] + index)
        if tuple(shape) == tuple(source.shape) and op in ("reshape", "expand"):
            return source
        return self.add("view", op, [source], shape, value.dtype, **params)

    def reduction(self, target: Any, args: list[Any], kwargs: dict[str, Any],
                  value: Any) -> Node | None:
        op = _REDUCTIONS[target]
        source = args[0]
        if not isinstance(source, Node):
            self.unsupported.append(str(target))
            return None
        dims_arg = args[1] if len(args) > 1 else kwargs.get("dim")
        if op in ("argmax", "argmin") and len(args) < 2:
            dims_arg = kwargs.get("dim")
        dims = _normalise_dims(dims_arg, source.rank)
        return self.add("reduce", op, [source], _shape_of(value), value.dtype, dims=dims,
                        count=product([source.shape[dim] for dim in dims]))

    def variance(self, target: Any, args: list[Any], kwargs: dict[str, Any],
                 value: Any) -> Node | None:
        """var/std as two reductions: the mean first, then the centred squares (stable)."""
        source = args[0]
        if not isinstance(source, Node):
            self.unsupported.append(str(target))
            return None
        dims = _normalise_dims(args[1] if len(args) > 1 else kwargs.get("dim"), source.rank)
        correction = kwargs.get("correction", args[2] if len(args) > 2 else 1)
        if target in (aten.var.dim, aten.std.dim):
            correction = 1 if (args[2] if len(args) > 2 else True) else 0
        if correction is None:
            correction = 1
        if isinstance(correction, float) and correction.is_integer():
            correction = int(correction)
        count = product([source.shape[dim] for dim in dims])
        keep = tuple(sympy.Integer(1) if index in dims else size
                     for index, size in enumerate(source.shape))
        mean = self.add("reduce", "mean", [source], keep, torch.float32, dims=dims,
                        count=count)
        centred = self.add("pointwise", "sub", [source, mean], source.shape, torch.float32)
        square = self.add("pointwise", "mul", [centred, centred], source.shape, torch.float32)
        total = self.add("reduce", "sum", [square], _shape_of(value), torch.float32,
                         dims=dims, count=count)
        variance = self.add("pointwise", "div", [total, count - correction],
                            _shape_of(value), value.dtype)
        if _VARIANCES[target] == "std":
            return self.add("pointwise", "sqrt", [variance], _shape_of(value), value.dtype)
        return variance

    def max_min_dim(self, target: Any, args: list[Any], kwargs: dict[str, Any],
                    value: Any) -> tuple[Node, Node] | None:
        source = args[0]
        if not isinstance(source, Node):
            self.unsupported.append(str(target))
            return None
        dims = _normalise_dims(args[1], source.rank)
        keepdim = bool(args[2]) if len(args) > 2 else False
        shape = _shape_of(value[0])
        kind = "max" if target == aten.max.dim else "min"
        count = product([source.shape[dim] for dim in dims])
        values = self.add("reduce", "amax" if kind == "max" else "amin", [source], shape,
                          value[0].dtype, dims=dims, count=count, keepdim=keepdim)
        indices = self.add("reduce", "argmax" if kind == "max" else "argmin", [source], shape,
                           value[1].dtype, dims=dims, count=count, keepdim=keepdim)
        return values, indices

    def matmul(self, target: Any, args: list[Any], kwargs: dict[str, Any],
               value: Any) -> Node | None:
        left, right = args[0], args[1]
        if not isinstance(left, Node) or not isinstance(right, Node):
            self.unsupported.append(str(target))
            return None
        return self.add("matmul", _MATMULS[target], [left, right], _shape_of(value),
                        value.dtype)

    def addmm(self, target: Any, args: list[Any], kwargs: dict[str, Any], value: Any) -> Any:
        bias, left, right = args[0], args[1], args[2]
        if not all(isinstance(item, Node) for item in (left, right)):
            self.unsupported.append(str(target))
            return None
        shape = _shape_of(value)
        product = self.add("matmul", "mm", [left, right], shape, value.dtype)
        alpha = kwargs.get("alpha", 1)
        beta = kwargs.get("beta", 1)
        if alpha != 1:
            product = self.add("pointwise", "mul", [product, alpha], shape, value.dtype)
        if beta == 0:
            return product
        if beta != 1:
            bias = self.add("pointwise", "mul", [bias, beta], bias.shape, value.dtype)
        return self.add("pointwise", "add", [product, bias], shape, value.dtype)


def _unresolved(items: Sequence[Any]) -> bool:
    for item in items:
        if isinstance(item, torch.fx.Node):
            return True
        if isinstance(item, (list, tuple)) and _unresolved(item):
            return True
    return False


def _normalise_dims(dims: Any, rank: int) -> list[int]:
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({int(dim) % max(rank, 1) for dim in dims})


def product(sizes: Sequence[Size]) -> Size:
    result: Size = sympy.Integer(1)
    for size in sizes:
        result = result * size
    return result


def lower_program(program: ExportedProgram) -> Graph:
    """The IR of an exported (and decomposed) program; raises UnsupportedGraphError."""
    lowering = _Lowering(program)
    inputs, attributes, names, constants = lowering.placeholders()
    output_node = None
    for fx_node in program.graph.nodes:
        if fx_node.op == "call_function":
            lowering.lower(fx_node)
        elif fx_node.op == "output":
            output_node = fx_node
        elif fx_node.op == "get_attr":
            lowering.unsupported.append(f"get_attr {fx_node.target}")
    if lowering.unsupported:
        raise UnsupportedGraphError(lowering.unsupported)
    assert output_node is not None
    user_outputs = [index for index, spec in enumerate(program.graph_signature.output_specs)
                    if spec.kind == OutputKind.USER_OUTPUT]
    raw_outputs = [output_node.args[0][index] for index in user_outputs]
    outputs: list[Node] = []
    for item in raw_outputs:
        lowered = lowering.by_fx.get(item) if isinstance(item, torch.fx.Node) else None
        if not isinstance(lowered, Node):
            raise UnsupportedGraphError([], "an output of the reference is not a tensor "
                                        "computed from its inputs")
        outputs.append(lowered)
    spec = program.call_spec.out_spec
    container = "tensor"
    if spec is not None and spec.type is tuple:
        container = "tuple"
    elif spec is not None and spec.type is list:
        container = "list"
    return Graph(nodes=lowering.nodes, inputs=inputs, attributes=attributes, outputs=outputs,
                 output_is_tuple=container != "tensor", output_container=container,
                 user_input_names=names, user_input_constants=constants)
