"""Offline Ascend C generation for the elementwise family.

Input: the IR the Triton generator uses (`lower_program(export_reference(model, inputs))`).
A graph is in scope when it is pointwise ops over same-shaped float32/float16 inputs and
scalar constants; anything else (views, reductions, matmuls, broadcasts, module
parameters, comparisons and selects outside the leaky-relu pattern) comes back as an
`Unsupported` listing what is out of scope.

Every value is computed in float32 on UB tiles: inputs are widened when they are float16
and results narrowed back (the kernel template does both). Each IR op becomes one or a few
standard Ascend C vector instructions (Add, Sub, Mul, Div, Max, Min, Adds, Muls, Maxs,
Mins, Exp, Ln, Abs, Sqrt, Relu, LeakyRelu, Duplicate). Activations without a basic
instruction are composed from them so no advanced API (whose signature moved between
releases) is needed:

    sigmoid(x)   = 1 / (1 + exp(-x))
    tanh(x)      = 2 / (1 + exp(-2x)) - 1
    gelu(x)      = (x + |x| * erf(|x| / sqrt 2)) / 2, erf by Abramowitz-Stegun 7.1.26
                   (|error| <= 1.5e-7, well inside float32 tolerances)
    gelu_tanh(x) = x / (1 + exp(-2k (x + 0.044715 x^3))),  k = sqrt(2 / pi)

1/x and 1/sqrt(x) divide into a tile of ones rather than use Reciprocal/Rsqrt, whose
accuracy we cannot check here; x / c multiplies by 1/c (at most one rounding apart).
Intermediates live in float32 scratch tiles ("slots"); a slot is reused once its value is
dead. Vector instructions may write over an operand only when the two overlap completely,
so a step's result may take a dying operand's slot only when the step reads its operands
before it first writes (`_Rule.in_place`).
"""

from __future__ import annotations

import heapq
import importlib.util
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeGuard

from runners.ascendc.package import (
    DEFAULT_NPU_ARCH,
    DEFAULT_SOC,
    KERNEL_DTYPES,
    Generation,
    KernelBody,
    PackageRequest,
    render_package,
)

if TYPE_CHECKING:
    from bot.agent.offline.graph import Graph, Node
    from runners.base import CaseSpec

Operand: TypeAlias = "str | float"  # a float32 LocalTensor's name, or a scalar
Arg: TypeAlias = "Node | float"

FLOAT32_MAX = 3.4028234663852886e38
SQRT_HALF = 1.0 / math.sqrt(2.0)
GELU_TANH_K = math.sqrt(2.0 / math.pi)
# Abramowitz & Stegun 7.1.26: erf(y) = 1 - (a1 t + ... + a5 t^5) exp(-y^2), t = 1/(1 + p y).
ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Unsupported:
    """The reference is outside the elementwise family; `ops` names what is missing."""

    ops: tuple[str, ...]
    reason: str
    status: Literal["unsupported"] = "unsupported"


@dataclass(frozen=True)
class Generated:
    op: str
    generation: Generation
    body: KernelBody
    inputs: tuple[str, ...]
    outputs: int
    dtypes: tuple[str, ...]
    files: dict[str, str]
    status: Literal["generated"] = "generated"


@dataclass(frozen=True)
class PackageOptions:
    """What the package needs besides the kernel: where it builds and what it tests."""

    generation: Generation = "legacy"
    cases: tuple[Mapping[str, Any], ...] = ()
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    init_args: Sequence[Any] | None = None
    perf_case: Mapping[str, Any] | None = None
    derive_tail_cases: bool = True
    soc: str = DEFAULT_SOC
    npu_arch: str = DEFAULT_NPU_ARCH


@dataclass(frozen=True)
class Lowered:
    """One graph as a kernel body, with what the package needs to know about it."""

    body: KernelBody
    inputs: tuple[str, ...]
    outputs: int
    dtype: str


class _Unsupported(Exception):
    def __init__(self, label: str) -> None:
        super().__init__(label)
        self.label = label


# --------------------------------------------------------------------------- instruction rules


class _Context:
    """Hands a rule its scratch temporaries."""

    def __init__(self, take: Callable[[], int]) -> None:
        self._take = take
        self.temps: list[int] = []

    def temp(self) -> str:
        slot = self._take()
        self.temps.append(slot)
        return f"s{slot}"


def _literal(value: float) -> str:
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f"


def _call(api: str, *args: Operand) -> str:
    rendered = [arg if isinstance(arg, str) else _literal(arg) for arg in args]
    return f"AscendC::{api}({', '.join(rendered)}, count);"


Emit = Callable[[_Context, str, list[Operand]], list[str]]


@dataclass(frozen=True)
class _Rule:
    emit: Emit
    # True when the rule reads its tensor operands only up to its first write of dst, so
    # dst may be (completely) the slot of an operand that dies here.
    in_place: bool


def _api(name: str) -> _Rule:
    return _Rule(lambda ctx, d, a: [_call(name, d, *a)], in_place=True)


def _axpy(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    first, second, alpha = a  # first + alpha * second
    return [_call("Muls", d, second, alpha), _call("Add", d, first, d)]


def _scalar_minus(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    tensor, scalar, alpha = a  # scalar - alpha * tensor
    return [_call("Muls", d, tensor, -float(alpha)), _call("Adds", d, d, scalar)]


def _scalar_div(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    tensor, scalar = a  # scalar / tensor
    return [_call("Duplicate", d, scalar), _call("Div", d, d, tensor)]


def _clamp(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    tensor, low, high = a
    return [_call("Maxs", d, tensor, low), _call("Mins", d, d, high)]


def _rsqrt(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    ones = ctx.temp()
    return [_call("Sqrt", d, a[0]), _call("Duplicate", ones, 1.0), _call("Div", d, ones, d)]


def _cube(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    return [_call("Mul", d, a[0], a[0]), _call("Mul", d, d, a[0])]


def _exp_scaled(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    tensor, scale = a  # exp(scale * tensor): base ** tensor with scale = ln(base)
    return [_call("Muls", d, tensor, scale), _call("Exp", d, d)]


def _sigmoid(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    ones = ctx.temp()
    return [_call("Muls", d, a[0], -1.0), _call("Exp", d, d), _call("Adds", d, d, 1.0),
            _call("Duplicate", ones, 1.0), _call("Div", d, ones, d)]


def _tanh(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    twos = ctx.temp()
    return [_call("Muls", d, a[0], -2.0), _call("Exp", d, d), _call("Adds", d, d, 1.0),
            _call("Duplicate", twos, 2.0), _call("Div", d, twos, d), _call("Adds", d, d, -1.0)]


def _gelu_erf(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    x = a[0]
    absolute, scaled, poly = ctx.temp(), ctx.temp(), ctx.temp()
    lines = [
        "// erf(|x| / sqrt 2) by Abramowitz-Stegun 7.1.26, then (x + |x| * erf) / 2",
        _call("Abs", absolute, x),
        _call("Muls", scaled, absolute, SQRT_HALF),
        _call("Muls", d, scaled, ERF_P),
        _call("Adds", d, d, 1.0),
        _call("Duplicate", poly, 1.0),
        _call("Div", d, poly, d),  # t = 1 / (1 + p y)
        _call("Muls", poly, d, ERF_A[4]),
    ]
    for coefficient in reversed(ERF_A[:4]):  # Horner: ((a5 t + a4) t + a3) t ...
        lines += [_call("Adds", poly, poly, coefficient), _call("Mul", poly, poly, d)]
    lines += [
        _call("Mul", d, scaled, scaled),
        _call("Muls", d, d, -1.0),
        _call("Exp", d, d),  # exp(-y^2)
        _call("Mul", d, poly, d),
        _call("Muls", d, d, -1.0),
        _call("Adds", d, d, 1.0),  # erf(y)
        _call("Mul", d, absolute, d),
        _call("Add", d, x, d),
        _call("Muls", d, d, 0.5),
    ]
    return lines


def _gelu_tanh(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    x = a[0]
    return [
        "// x * sigmoid(2k u) = 0.5 x (1 + tanh(k u)), u = x + 0.044715 x^3",
        _call("Mul", d, x, x), _call("Muls", d, d, 0.044715), _call("Adds", d, d, 1.0),
        _call("Mul", d, d, x), _call("Muls", d, d, -2.0 * GELU_TANH_K), _call("Exp", d, d),
        _call("Adds", d, d, 1.0), _call("Div", d, x, d),
    ]


def _reciprocal(ctx: _Context, d: str, a: list[Operand]) -> list[str]:
    return [_call("Duplicate", d, 1.0), _call("Div", d, d, a[0])]


_RULES: dict[str, _Rule] = {
    "add": _api("Add"), "sub": _api("Sub"), "mul": _api("Mul"), "div": _api("Div"),
    "max": _api("Max"), "min": _api("Min"), "adds": _api("Adds"), "muls": _api("Muls"),
    "maxs": _api("Maxs"), "mins": _api("Mins"), "exp": _api("Exp"), "ln": _api("Ln"),
    "abs": _api("Abs"), "sqrt": _api("Sqrt"), "relu": _api("Relu"),
    "leaky_relu": _api("LeakyRelu"),
    "neg": _Rule(lambda ctx, d, a: [_call("Muls", d, a[0], -1.0)], in_place=True),
    "copy": _Rule(lambda ctx, d, a: [_call("Muls", d, a[0], 1.0)], in_place=True),
    "fill": _Rule(lambda ctx, d, a: [_call("Duplicate", d, a[0])], in_place=True),
    "square": _Rule(lambda ctx, d, a: [_call("Mul", d, a[0], a[0])], in_place=True),
    "axpy": _Rule(_axpy, in_place=False),
    "scalar_minus": _Rule(_scalar_minus, in_place=True),
    "scalar_div": _Rule(_scalar_div, in_place=False),
    "clamp": _Rule(_clamp, in_place=True),
    "rsqrt": _Rule(_rsqrt, in_place=True),
    "cube": _Rule(_cube, in_place=False),
    "exp_scaled": _Rule(_exp_scaled, in_place=True),
    "reciprocal": _Rule(_reciprocal, in_place=False),
    "sigmoid": _Rule(_sigmoid, in_place=True),
    "tanh": _Rule(_tanh, in_place=True),
    "gelu": _Rule(_gelu_erf, in_place=False),
    "gelu_tanh": _Rule(_gelu_tanh, in_place=False),
}


# --------------------------------------------------------------------------- planning


@dataclass
class _Step:
    node: Node
    rule: str
    args: list[Arg]  # tensor operands are resolved Nodes (casts looked through)

    def tensors(self) -> list[Node]:
        return [arg for arg in self.args if not isinstance(arg, float)]


def _dtype_name(node: Node) -> str:
    return str(node.dtype).removeprefix("torch.")


def _is_node(value: object) -> TypeGuard[Node]:
    # Duck-typed so this module imports without torch (the IR module needs it).
    return hasattr(value, "kind") and hasattr(value, "op") and hasattr(value, "users")


def _resolve(node: Node) -> Node:
    """Look through float casts: everything is computed in float32 anyway."""
    while node.kind == "pointwise" and node.op == "cast" and _is_node(node.args[0]):
        node = node.args[0]
    return node


class _Planner:
    """IR pointwise nodes -> a list of rule applications, collecting what is unsupported."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.steps: list[_Step] = []
        self.absorbed: set[int] = set()  # ids of comparison/mul nodes folded into a where
        self.problems: list[str] = []

    def scalar(self, value: Any) -> float:
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)):
            raise _Unsupported(f"non-scalar argument {type(value).__name__}")
        number = float(value)
        if not math.isfinite(number) or abs(number) > FLOAT32_MAX:
            raise _Unsupported(f"non-finite or out-of-range scalar {value!r}")
        return number

    def arg(self, value: Any) -> Arg:
        if _is_node(value):
            if value.kind == "const":
                return self.scalar(value.params.get("value"))
            return _resolve(value)
        return self.scalar(value)

    def plan(self) -> None:
        # Patterns first: a where absorbs the comparison and the product before it, which
        # come earlier in topological order.
        patterns: dict[int, _Step] = {}
        for node in self.graph.nodes:
            if node.kind == "pointwise" and node.op == "where":
                try:
                    patterns[id(node)] = self.where(node)
                except _Unsupported as exc:
                    self.problems.append(exc.label)
        for node in self.graph.nodes:
            if node.kind != "pointwise" or id(node) in self.absorbed or node.op == "where":
                if id(node) in patterns:
                    self.steps.append(patterns[id(node)])
                continue
            try:
                self.plan_node(node)
            except _Unsupported as exc:
                self.problems.append(exc.label)

    def plan_node(self, node: Node) -> None:
        if node.op == "cast":
            if _dtype_name(node) not in KERNEL_DTYPES:
                raise _Unsupported(f"cast to {_dtype_name(node)}")
            return  # an alias: casts between float16 and float32 are free in float32
        args = [None if value is None else self.arg(value) for value in node.args]
        rule, operands = _map_op(node.op, args, node.params)
        self.steps.append(_Step(node, rule, operands))

    def where(self, node: Node) -> _Step:
        """where(x > 0, x, x * s) is LeakyRelu; where(x > 0, x, 0) is Relu."""
        cond, chosen, other = (self.arg(value) for value in node.args)
        if not isinstance(cond, float) and cond.op in ("gt", "ge") and len(cond.users) == 1:
            source = self.arg(cond.args[0])
            threshold = self.arg(cond.args[1])
            if threshold == 0.0 and not isinstance(source, float) and chosen is source:
                if other == 0.0:
                    self.absorbed.add(id(cond))
                    return _Step(node, "relu", [source])
                slope = self.slope(other, source)
                if slope is not None:
                    self.absorbed.update({id(cond), id(other)})
                    return _Step(node, "leaky_relu", [source, slope])
        raise _Unsupported("where (only the leaky-relu / relu patterns)")

    def slope(self, other: Arg, source: Node) -> float | None:
        if isinstance(other, float) or other.op != "mul" or len(other.users) != 1:
            return None
        first, second = (self.arg(value) for value in other.args)
        if first is source and isinstance(second, float):
            return second
        if second is source and isinstance(first, float):
            return first
        return None


def _is_scalar(arg: Arg) -> bool:
    return isinstance(arg, float)


def _map_op(op: str, given: list[Arg | None],
            params: Mapping[str, Any]) -> tuple[str, list[Arg]]:
    """IR op + operands -> (rule, operands)."""
    if op == "clamp":  # the only op whose arguments may be None (a missing bound)
        return _map_clamp(given)
    if not given or any(arg is None for arg in given):
        raise _Unsupported(f"{op} with a missing operand")
    args: list[Arg] = [arg for arg in given if arg is not None]
    alpha = float(params.get("alpha", 1))
    if op == "rsub":  # rsub(a, b, alpha) = b - alpha * a
        op, args = "sub", [args[1], args[0]]
    if op in ("add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max"):
        return _map_binary(op, args[0], args[1], alpha)
    unary = {"abs": "abs", "exp": "exp", "log": "ln", "sqrt": "sqrt", "relu": "relu",
             "neg": "neg", "rsqrt": "rsqrt", "reciprocal": "reciprocal", "sigmoid": "sigmoid",
             "tanh": "tanh"}
    if op in unary and not _is_scalar(args[0]):
        return unary[op], [args[0]]
    if op == "gelu" and not _is_scalar(args[0]):
        approximate = params.get("approximate", "none")
        if approximate not in ("none", "tanh"):
            raise _Unsupported(f"gelu(approximate={approximate!r})")
        return ("gelu" if approximate == "none" else "gelu_tanh"), [args[0]]
    if op == "pow":
        return _map_pow(args[0], args[1])
    raise _Unsupported(op)


def _map_binary(op: str, first: Arg, second: Arg, alpha: float) -> tuple[str, list[Arg]]:
    if isinstance(first, float) and isinstance(second, float):
        raise _Unsupported(f"{op} of two scalars")
    if op in ("add", "sub"):
        return _map_add_sub(op == "add", first, second, alpha)
    if op in ("mul", "div"):
        return _map_mul_div(op == "mul", first, second)
    # maximum / minimum / clamp_min / clamp_max are symmetric in their operands
    tensor_rule = "max" if op in ("maximum", "clamp_min") else "min"
    if isinstance(first, float):
        first, second = second, first
    return (tensor_rule + "s" if isinstance(second, float) else tensor_rule), [first, second]


def _map_add_sub(add: bool, first: Arg, second: Arg, alpha: float) -> tuple[str, list[Arg]]:
    """first +- alpha * second."""
    sign = 1.0 if add else -1.0
    if isinstance(second, float):
        return "adds", [first, sign * alpha * second]
    if isinstance(first, float):
        if add and alpha == 1.0:
            return "adds", [second, first]
        return "scalar_minus", [second, first, -sign * alpha]
    if alpha == 1.0:
        return ("add" if add else "sub"), [first, second]
    return "axpy", [first, second, sign * alpha]


def _map_mul_div(mul: bool, first: Arg, second: Arg) -> tuple[str, list[Arg]]:
    if mul:
        if isinstance(first, float):
            return "muls", [second, first]
        return ("muls" if isinstance(second, float) else "mul"), [first, second]
    if isinstance(first, float):
        return "scalar_div", [second, first]
    if isinstance(second, float):
        if second == 0.0:
            raise _Unsupported("div by the scalar 0")
        return "muls", [first, 1.0 / second]
    return "div", [first, second]


def _map_clamp(args: list[Arg | None]) -> tuple[str, list[Arg]]:
    tensor = args[0]
    low = args[1] if len(args) > 1 else None
    high = args[2] if len(args) > 2 else None
    if tensor is None or _is_scalar(tensor):
        raise _Unsupported("clamp of a scalar")
    if not (low is None or isinstance(low, float)) or not (high is None or
                                                          isinstance(high, float)):
        raise _Unsupported("clamp with tensor bounds")
    if low is None and high is None:
        return "copy", [tensor]
    if low is None:
        assert high is not None
        return "mins", [tensor, high]
    if high is None:
        return "maxs", [tensor, low]
    return "clamp", [tensor, low, high]


_POWERS: dict[float, str] = {2.0: "square", 3.0: "cube", 0.5: "sqrt", 1.0: "copy",
                             -1.0: "reciprocal", -0.5: "rsqrt"}


def _map_pow(base: Arg, exponent: Arg) -> tuple[str, list[Arg]]:
    if not isinstance(base, float) and isinstance(exponent, float):
        if exponent == 0.0:
            return "fill", [1.0]
        rule = _POWERS.get(exponent)
        if rule is None:
            raise _Unsupported(f"pow with exponent {exponent}")
        return rule, [base]
    if isinstance(base, float) and not isinstance(exponent, float) and base > 0:
        return "exp_scaled", [exponent, math.log(base)]
    raise _Unsupported("pow (tensor exponent or non-positive base)")


# --------------------------------------------------------------------------- checks


def _scope_problems(graph: Graph) -> list[str]:
    """What puts the graph outside the elementwise family, before any op is looked at."""
    problems: list[str] = []
    if not graph.inputs:
        problems.append("no tensor inputs")
        return problems
    shape = tuple(graph.inputs[0].shape)
    for node in graph.attributes:
        if node.users:
            problems.append(f"module parameter or buffer {node.source.removeprefix('attr:')} "
                            "(broadcast parameters are out of scope)")
    for node in graph.nodes:
        if node.kind in ("view", "reduce", "matmul"):
            problems.append(f"{node.kind}:{node.op}")
        elif node.kind == "pointwise" and tuple(node.shape) != shape:
            problems.append(f"broadcast or independent shapes in {node.op}")
    # Symbolic shapes: equal only when the trace ties them (x + y does; unrelated inputs
    # get sizes of their own), and one kernel launch covers one shape.
    for node in [*graph.inputs, *graph.outputs]:
        if tuple(node.shape) != shape:
            problems.append(f"broadcast or independent shapes: {node.name} has shape "
                            f"{tuple(node.shape)}, not {shape}")
    dtypes = {_dtype_name(node) for node in [*graph.inputs, *graph.outputs]}
    if len(dtypes) > 1:
        problems.append(f"mixed dtypes {sorted(dtypes)}")
    elif not dtypes <= set(KERNEL_DTYPES):
        problems.append(f"dtype {dtypes.pop()} (kernels exist for float32 and float16)")
    return problems


# --------------------------------------------------------------------------- emission


class _Emitter:
    """Rule applications -> C++ statements, with scratch slots allocated and reused."""

    def __init__(self, graph: Graph, steps: list[_Step]) -> None:
        self.graph = graph
        self.steps = steps
        self.free: list[int] = []
        self.high_water = 0
        self.names: dict[int, str] = {id(node): f"x{i}" for i, node in enumerate(graph.inputs)}
        self.slots: dict[int, int] = {}
        self.lines: list[str] = []
        self.targets = self._output_targets()
        self.last_use = self._last_uses()

    def _output_targets(self) -> dict[int, str]:
        """Computed outputs are written straight into their output tile y<k>."""
        targets: dict[int, str] = {}
        computed = {id(step.node) for step in self.steps}
        for index, output in enumerate(self.graph.outputs):
            node = _resolve(output)
            if id(node) in computed and id(node) not in targets:
                targets[id(node)] = f"y{index}"
        return targets

    def _last_uses(self) -> dict[int, int]:
        last: dict[int, int] = {}
        for index, step in enumerate(self.steps):
            for node in step.tensors():
                last[id(node)] = index
        return last

    def take(self) -> int:
        if self.free:
            return heapq.heappop(self.free)
        self.high_water += 1
        return self.high_water - 1

    def give(self, slot: int) -> None:
        heapq.heappush(self.free, slot)

    def operand(self, arg: Arg) -> Operand:
        if isinstance(arg, float):
            return arg
        if id(arg) not in self.names:
            raise _Unsupported(f"{arg.kind}:{arg.op} as an operand")
        return self.names[id(arg)]

    def dying(self, index: int, step: _Step) -> list[int]:
        slots = {self.slots[id(node)] for node in step.tensors()
                 if self.last_use.get(id(node)) == index and id(node) in self.slots}
        return sorted(slots)

    def emit_step(self, index: int, step: _Step) -> None:
        rule = _RULES[step.rule]
        operands = [self.operand(arg) for arg in step.args]
        dying = self.dying(index, step)
        if rule.in_place:
            for slot in dying:
                self.give(slot)
        destination = self.targets.get(id(step.node))
        if destination is None:
            slot = self.take()
            self.slots[id(step.node)] = slot
            destination = f"s{slot}"
        context = _Context(self.take)
        statements = rule.emit(context, destination, operands)
        shown = ", ".join(arg if isinstance(arg, str) else _literal(arg) for arg in operands)
        self.lines += [f"// {destination} = {step.rule}({shown})", *statements]
        for slot in context.temps:
            self.give(slot)
        if not rule.in_place:
            for slot in dying:
                self.give(slot)
        self.names[id(step.node)] = destination

    def emit_outputs(self) -> None:
        """Outputs that are no computed value of their own get a copy (or a fill)."""
        for index, output in enumerate(self.graph.outputs):
            target = f"y{index}"
            node = _resolve(output)
            if self.targets.get(id(node)) == target:
                continue
            if node.kind == "const":
                value = float(node.params.get("value", 0.0))
                self.lines += [f"// {target} = fill({_literal(value)})",
                               _call("Duplicate", target, value)]
                continue
            source = self.operand(node)
            self.lines += [f"// {target} = copy({source})", _call("Muls", target, source, 1.0)]

    def run(self) -> tuple[tuple[str, ...], int]:
        for index, step in enumerate(self.steps):
            self.emit_step(index, step)
        self.emit_outputs()
        return tuple(self.lines), self.high_water


def _expression(node: Node, names: Mapping[int, str], depth: int = 0) -> str:
    node = _resolve(node)
    if id(node) in names:
        return names[id(node)]
    if node.kind == "const":
        return repr(node.params.get("value"))
    if depth > 3:
        return "..."
    parts = [_expression(arg, names, depth + 1) if hasattr(arg, "kind") else repr(arg)
             for arg in node.args]
    label = node.op
    if node.op == "gelu" and node.params.get("approximate", "none") != "none":
        label = f"gelu[{node.params['approximate']}]"
    return f"{label}({', '.join(parts)})"


def _input_names(graph: Graph) -> tuple[str, ...]:
    return tuple(node.name for node in graph.inputs)


def lower(graph: Graph) -> Lowered | Unsupported:
    """One IR graph -> the kernel body computing it, or what puts it out of scope."""
    problems = _scope_problems(graph)
    planner = _Planner(graph)
    planner.plan()
    problems += planner.problems
    if problems:
        return Unsupported(tuple(dict.fromkeys(problems)),
                           "outside the elementwise Ascend C generator: "
                           + ", ".join(dict.fromkeys(problems)))
    try:
        compute, slots = _Emitter(graph, planner.steps).run()
    except _Unsupported as exc:
        return Unsupported((exc.label,), f"outside the elementwise Ascend C generator: "
                           f"{exc.label}")
    input_names = {id(node): node.name for node in graph.inputs}
    outputs = "out" if len(graph.outputs) == 1 else "out{k}"
    summary = "; ".join(f"{outputs.format(k=k)} = {_expression(node, input_names)}"
                        for k, node in enumerate(graph.outputs))
    return Lowered(body=KernelBody(compute=compute, compute_slots=slots, summary=summary),
                   inputs=_input_names(graph), outputs=len(graph.outputs),
                   dtype=_dtype_name(graph.inputs[0]))


# --------------------------------------------------------------------------- entry points


def generate(graphs: Sequence[Graph], op: str,
             options: PackageOptions | None = None) -> Generated | Unsupported:
    """The package for a reference traced once per dtype (one graph each).

    The kernel is one template over the element type, so every dtype's graph must lower
    to the same compute chain (float casts aside, they do for the elementwise family).
    """
    options = options or PackageOptions()
    if not graphs:
        return Unsupported((), "no traced graph to generate from")
    lowered: list[Lowered] = []
    for graph in graphs:
        result = lower(graph)
        if isinstance(result, Unsupported):
            return result
        lowered.append(result)
    first = lowered[0]
    for other in lowered[1:]:
        if (other.body.compute, other.inputs, other.outputs) != \
                (first.body.compute, first.inputs, first.outputs):
            return Unsupported((), f"the {other.dtype} trace computes differently from the "
                               f"{first.dtype} one; one kernel template cannot serve both")
    dtypes = tuple(dict.fromkeys(item.dtype for item in lowered))
    request = PackageRequest(
        op=op, generation=options.generation, body=first.body, inputs=first.inputs,
        outputs=first.outputs, dtypes=dtypes, cases=options.cases,
        tolerances=options.tolerances, init_args=options.init_args,
        perf_case=options.perf_case, derive_tail_cases=options.derive_tail_cases,
        soc=options.soc, npu_arch=options.npu_arch)
    return Generated(op=op, generation=options.generation, body=first.body,
                     inputs=first.inputs, outputs=first.outputs, dtypes=dtypes,
                     files=render_package(request))


def generate_from_model(model: Any, examples: Sequence[Sequence[Any]], op: str,
                        options: PackageOptions | None = None) -> Generated | Unsupported:
    """Trace `model` on each example input list (one per dtype) and generate."""
    from bot.agent.offline.graph import UnsupportedGraphError, lower_program
    from bot.agent.offline.trace import export_reference

    graphs: list[Graph] = []
    for inputs in examples:
        try:
            graphs.append(lower_program(export_reference(model, list(inputs))))
        except UnsupportedGraphError as exc:
            return Unsupported(tuple(exc.ops), str(exc))
    return generate(graphs, op, options)


def generate_from_reference(reference: Path, op: str, *, cases: Sequence[CaseSpec],
                            init_args: Sequence[Any] | None,
                            options: PackageOptions | None = None) -> Generated | Unsupported:
    """Load a KernelBench-format reference and generate. It runs user code: call it in a
    worker process, as the Triton generator's driver is."""
    import torch

    from bot.agent.offline.driver import example_inputs

    spec = importlib.util.spec_from_file_location("opbot_ascendc_reference", reference)
    if spec is None or spec.loader is None:
        return Unsupported((), f"{reference} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules["opbot_ascendc_reference"] = module
    spec.loader.exec_module(module)
    arguments = list(init_args) if init_args is not None else (
        list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else [])
    torch.manual_seed(0)
    model = module.Model(*arguments)
    examples = example_inputs(module, list(cases))
    base = options or PackageOptions()
    options = PackageOptions(
        generation=base.generation, cases=base.cases or tuple(c.to_json() for c in cases),
        tolerances=base.tolerances, init_args=base.init_args if base.init_args is not None
        else init_args, perf_case=base.perf_case, derive_tail_cases=base.derive_tail_cases,
        soc=base.soc, npu_arch=base.npu_arch)
    return generate_from_model(model, examples, op, options)
