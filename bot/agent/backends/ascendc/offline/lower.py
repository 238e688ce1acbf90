"""One IR graph of the elementwise family -> an Ascend C kernel body (compute chain).

Input: the IR the Triton generator uses (`lower_program(export_reference(model, inputs))`).
A graph is in scope when it is pointwise ops over same-shaped float32/float16 inputs and
scalar constants; anything else (views, reductions, matmuls, broadcasts, module
parameters, comparisons and selects outside the leaky-relu pattern) comes back as an
`Unsupported` listing what is out of scope.

Every value is computed in float32 on UB tiles: inputs are widened when they are float16
and results narrowed back (the kernel template does both). The planner maps each IR op
to a rule (see `rules` for the instructions each writes); intermediates live in float32
scratch tiles ("slots"), and a slot is reused once its value is dead. A step's result may
take a dying operand's slot only when its rule reads operands before it first writes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeGuard

from bot.agent.backends.ascendc.offline.rules import RULES, Context, Operand, call, literal
from runners.ascendc.package import KERNEL_DTYPES, KernelBody

if TYPE_CHECKING:
    from bot.agent.offline.graph import Graph, Node

Arg: TypeAlias = "Node | float"

FLOAT32_MAX = 3.4028234663852886e38


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Unsupported:
    """The reference is outside the elementwise family; `ops` names what is missing."""

    ops: tuple[str, ...]
    reason: str
    status: Literal["unsupported"] = "unsupported"


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


class SlotPool:
    """Scratch slots of one kind, named `<prefix><n>`: the lowest free one is reused once
    its value is dead; `high_water` is how many the kernel must declare."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.free: list[int] = []
        self.high_water = 0

    def take(self) -> int:
        if self.free:
            return heapq.heappop(self.free)
        self.high_water += 1
        return self.high_water - 1

    def give(self, slot: int) -> None:
        heapq.heappush(self.free, slot)


class _Emitter:
    """Rule applications -> C++ statements, with scratch slots allocated and reused."""

    def __init__(self, graph: Graph, steps: list[_Step]) -> None:
        self.graph = graph
        self.steps = steps
        self.pool = SlotPool()
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
        return self.pool.take()

    def give(self, slot: int) -> None:
        self.pool.give(slot)

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
        rule = RULES[step.rule]
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
        context = Context(self.take)
        statements = rule.emit(context, destination, operands)
        shown = ", ".join(arg if isinstance(arg, str) else literal(arg) for arg in operands)
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
                self.lines += [f"// {target} = fill({literal(value)})",
                               call("Duplicate", target, value)]
                continue
            source = self.operand(node)
            self.lines += [f"// {target} = copy({source})", call("Muls", target, source, 1.0)]

    def run(self) -> tuple[tuple[str, ...], int]:
        for index, step in enumerate(self.steps):
            self.emit_step(index, step)
        self.emit_outputs()
        return tuple(self.lines), self.pool.high_water


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


