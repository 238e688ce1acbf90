"""One IR graph of the row family -> a row-pattern Ascend C kernel body.

The row family (softmax, log_softmax, RMSNorm, LayerNorm): same-shaped inputs (..., D),
reductions over the last dimension only, pointwise ops over rows (shape (..., D)), over
per-row scalars ("stats", shape (...,) or (..., 1)) and module parameters of shape (D,),
and outputs shaped like the inputs. Anything else comes back `Unsupported`.

Values live in float32 UB tensors: inputs `x<i>`, parameters `p<j>`, rows `s<n>` (scratch
slots), stats `t<n>` (one 32-byte block each, the value in every lane), outputs `y<k>`
(see runners/ascendc/rows.py for the kernel around them). A row op whose operand is a
stat first broadcasts it into a scratch row; a stat op runs the same rules over STAT_LEN
lanes; a reduction is the kernel's ReduceRow (a tree of basic vector instructions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from bot.agent.backends.ascendc.offline.lower import (
    Lowered,
    SlotPool,
    Unsupported,
    _dtype_name,
    _expression,
    _is_node,
    _map_op,
    _resolve,
    _Unsupported,
)
from bot.agent.backends.ascendc.offline.rules import RULES, Context, Operand, literal
from runners.ascendc.package import KERNEL_DTYPES, KernelBody, ParamSpec

if TYPE_CHECKING:
    from bot.agent.offline.graph import Graph, Node

Kind = Literal["row", "stat"]
_ALIAS_VIEWS = frozenset({"broadcast_in_dim", "reshape", "view", "unsqueeze", "squeeze",
                          "expand"})
_REDUCTIONS = frozenset({"sum", "amax", "amin", "mean"})


@dataclass(frozen=True)
class LoweredRows(Lowered):
    """A row-pattern graph as a kernel body, and the parameters the kernel takes."""

    params: tuple[ParamSpec, ...] = ()


class _PrefixContext(Context):
    """A rule's temporaries from one pool, named with its prefix."""

    def __init__(self, pool: SlotPool) -> None:
        super().__init__(pool.take)
        self.pool = pool

    def temp(self) -> str:
        slot = self.pool.take()
        self.temps.append(slot)
        return f"{self.pool.prefix}{slot}"


def _on_stats(lines: list[str]) -> list[str]:
    """Rules write `..., count);`; over a stat the count is its STAT_LEN lanes."""
    return [line[:-len("count);")] + "STAT_LEN);" if line.endswith(", count);") else line
            for line in lines]


class _RowLowering:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.shape = tuple(graph.inputs[0].shape)
        self.kinds: dict[int, Kind] = {}
        self.names: dict[int, str] = {}
        self.slots: dict[int, tuple[SlotPool, int]] = {}
        self.rows, self.stats = SlotPool("s"), SlotPool("t")
        self.lines: list[str] = []
        self.params: list[ParamSpec] = []
        self.last_use: dict[int, int] = {}
        self.targets = {id(_resolve(node)): f"y{k}" for k, node in enumerate(graph.outputs)}

    # ----------------------------------------------------------------- classification

    def row_shaped(self, node: Node) -> bool:
        return tuple(node.shape) == self.shape

    def stat_shaped(self, node: Node) -> bool:
        shape = tuple(node.shape)
        return shape in (self.shape[:-1], (*self.shape[:-1], 1))

    def declare_inputs(self) -> None:
        for index, node in enumerate(self.graph.inputs):
            if not self.row_shaped(node):
                raise _Unsupported(f"input {node.name} of shape {tuple(node.shape)}: the row "
                                   f"pattern needs every input shaped {self.shape}")
            self.kinds[id(node)], self.names[id(node)] = "row", f"x{index}"
        for node in self.graph.attributes:
            if node.users:
                self.declare_param(node)

    def declare_param(self, node: Node) -> None:
        name = node.source.removeprefix("attr:")
        shape = tuple(node.shape)
        if shape != self.shape[-1:] or not all(isinstance(dim, int) or getattr(
                dim, "is_Integer", False) for dim in shape):
            raise _Unsupported(f"parameter {name} of shape {shape} (a row pattern parameter "
                               f"has the last dimension's size, {self.shape[-1:]})")
        if not all(part.isidentifier() and not part.startswith("_")
                   for part in name.split(".")):
            raise _Unsupported(f"parameter {name} (not a plain state_dict key)")
        self.kinds[id(node)] = "row"
        self.names[id(node)] = f"p{len(self.params)}"
        self.params.append(ParamSpec(name, tuple(int(dim) for dim in shape)))

    # ----------------------------------------------------------------- emission

    def operand(self, arg: Any) -> Operand:
        if isinstance(arg, float):
            return arg
        if id(arg) not in self.names:
            raise _Unsupported(f"{arg.kind}:{arg.op} as an operand")
        return self.names[id(arg)]

    def scalar_or_node(self, value: Any) -> Any:
        if _is_node(value):
            if value.kind == "const":
                return float(value.params.get("value", 0.0))
            return _resolve(value)
        if isinstance(value, (bool, int, float)):
            return float(value)
        if getattr(value, "is_number", False) and getattr(value, "is_real", False):
            return float(value)  # a sympy constant: a fixed size the trace folded in
        raise _Unsupported(f"argument {type(value).__name__}")

    def destination(self, node: Node, kind: Kind) -> str:
        target = self.targets.get(id(node))
        if target is not None and kind == "row":
            return target
        pool = self.rows if kind == "row" else self.stats
        slot = pool.take()
        self.slots[id(node)] = (pool, slot)
        return f"{pool.prefix}{slot}"

    def release(self, index: int, operands: list[Any]) -> None:
        for arg in operands:
            if _is_node(arg) and self.last_use.get(id(arg)) == index and id(arg) in self.slots:
                pool, slot = self.slots.pop(id(arg))
                pool.give(slot)

    def alias(self, node: Node, source: Node) -> None:
        self.kinds[id(node)] = self.kinds[id(source)]
        self.names[id(node)] = self.names[id(source)]
        if id(source) in self.slots:  # the alias keeps the slot alive until its own last use
            self.last_use[id(source)] = max(self.last_use.get(id(source), -1),
                                            self.last_use.get(id(node), -1))

    def view(self, node: Node) -> None:
        source = self.scalar_or_node(node.args[0])
        if node.op not in _ALIAS_VIEWS or not _is_node(source) or id(source) not in self.kinds:
            raise _Unsupported(f"view:{node.op}")
        if self.kinds[id(source)] == "stat" or self.row_shaped(node):
            self.alias(node, source)
            return
        raise _Unsupported(f"view:{node.op} of a row into shape {tuple(node.shape)}")

    def reduce(self, index: int, node: Node) -> None:
        source = self.scalar_or_node(node.args[0])
        dims = [int(dim) % len(self.shape) for dim in node.params.get("dims") or []]
        if node.op not in _REDUCTIONS or dims != [len(self.shape) - 1] or not _is_node(
                source) or self.kinds.get(id(source)) != "row":
            raise _Unsupported(f"reduce:{node.op} over dims {node.params.get('dims')} (the "
                               "row pattern reduces rows over the last dimension)")
        src = self.operand(source)
        dst = self.destination(node, "stat")
        self.kinds[id(node)], self.names[id(node)] = "stat", dst
        lines = [f"// {dst} = {node.op} over the row of {src}"]
        if node.op == "amin":  # min(x) = -max(-x)
            temp = self.rows.take()
            lines += [f"AscendC::Muls(s{temp}, {src}, -1.0f, count);",
                      f"ReduceRow({dst}, s{temp}, count, true);",
                      f"AscendC::Muls({dst}, {dst}, -1.0f, STAT_LEN);"]
            self.rows.give(temp)
        else:
            lines.append(f"ReduceRow({dst}, {src}, count, {str(node.op == 'amax').lower()});")
        if node.op == "mean":
            lines.append(f"AscendC::Muls({dst}, {dst}, 1.0f / static_cast<float>(count), "
                         "STAT_LEN);")
        self.lines += lines
        self.release(index, [source])

    def pointwise(self, index: int, node: Node) -> None:
        if node.op == "cast":
            if _dtype_name(node) not in KERNEL_DTYPES:
                raise _Unsupported(f"cast to {_dtype_name(node)}")
            self.alias(node, self.scalar_or_node(node.args[0]))
            return
        args = [None if value is None else self.scalar_or_node(value) for value in node.args]
        rule, operands = _map_op(node.op, args, node.params)
        tensors = [arg for arg in operands if _is_node(arg)]
        if any(id(arg) not in self.kinds for arg in tensors):
            raise _Unsupported(f"{node.op} of a value the row pattern does not hold")
        kind: Kind = "row" if any(self.kinds[id(arg)] == "row" for arg in tensors) \
            or self.row_shaped(node) else "stat"
        if kind == "stat" and not self.stat_shaped(node):
            raise _Unsupported(f"{node.op} with shape {tuple(node.shape)}")
        self.emit(index, node, kind, rule, operands)

    def emit(self, index: int, node: Node, kind: Kind, rule: str, operands: list[Any]) -> None:
        pool = self.rows if kind == "row" else self.stats
        context = _PrefixContext(pool)
        lines: list[str] = []
        rendered: list[Operand] = []
        for arg in operands:
            if _is_node(arg) and kind == "row" and self.kinds[id(arg)] == "stat":
                wide = context.temp()  # a stat operand of a row op: broadcast it first
                lines.append(f"Broadcast({wide}, {self.operand(arg)}, count);")
                rendered.append(wide)
            else:
                rendered.append(self.operand(arg))
        dst = self.destination(node, kind)
        self.kinds[id(node)], self.names[id(node)] = kind, dst
        emitted = RULES[rule].emit(context, dst, rendered)
        shown = ", ".join(arg if isinstance(arg, str) else literal(arg) for arg in rendered)
        lines += emitted if kind == "row" else _on_stats(emitted)
        self.lines += [f"// {dst} = {rule}({shown})", *lines]
        for slot in context.temps:
            pool.give(slot)
        self.release(index, operands)

    # ----------------------------------------------------------------- driver

    def plan_last_uses(self) -> None:
        for index, node in enumerate(self.graph.nodes):
            for arg in node.args:
                if _is_node(arg):
                    self.last_use[id(_resolve(arg))] = index
        for node in self.graph.outputs:
            self.last_use[id(_resolve(node))] = len(self.graph.nodes)

    def run(self) -> None:
        self.declare_inputs()
        self.plan_last_uses()
        steps: dict[str, Callable[[int, Node], None]] = {
            "reduce": self.reduce, "pointwise": self.pointwise,
            "view": lambda _index, node: self.view(node)}
        for index, node in enumerate(self.graph.nodes):
            if node.kind in ("input", "const"):
                continue
            step = steps.get(node.kind)
            if step is None:
                raise _Unsupported(f"{node.kind}:{node.op}")
            step(index, node)
        self.finish_outputs()

    def finish_outputs(self) -> None:
        for index, output in enumerate(self.graph.outputs):
            node = _resolve(output)
            target = f"y{index}"
            if self.kinds.get(id(node)) != "row":
                raise _Unsupported(f"output {index} is not shaped like the inputs (per-row "
                                   "outputs are not generated)")
            if self.names[id(node)] != target:
                self.lines += [f"// {target} = copy({self.names[id(node)]})",
                               f"AscendC::Muls({target}, {self.names[id(node)]}, 1.0f, count);"]


def _scope_problems(graph: Graph) -> list[str]:
    if not graph.inputs:
        return ["no tensor inputs"]
    if not graph.inputs[0].shape:
        return ["a 0-dimensional input has no rows"]
    dtypes = {_dtype_name(node) for node in [*graph.inputs, *graph.outputs]}
    if len(dtypes) > 1:
        return [f"mixed dtypes {sorted(dtypes)}"]
    if not dtypes <= set(KERNEL_DTYPES):
        return [f"dtype {dtypes.pop()} (kernels exist for float32 and float16)"]
    if not any(node.kind == "reduce" for node in graph.nodes):
        return ["no reduction (the elementwise generator covers it)"]
    return []


def lower_rows(graph: Graph) -> LoweredRows | Unsupported:
    """One IR graph -> the row kernel body computing it, or what puts it out of scope."""
    problems = _scope_problems(graph)
    if problems:
        return Unsupported(tuple(problems), "outside the row Ascend C generator: "
                           + ", ".join(problems))
    lowering = _RowLowering(graph)
    try:
        lowering.run()
    except _Unsupported as exc:
        return Unsupported((exc.label,), f"outside the row Ascend C generator: {exc.label}")
    names = {id(node): node.name for node in graph.inputs}
    names.update({id(node): node.source.removeprefix("attr:") for node in graph.attributes})
    outputs = "out" if len(graph.outputs) == 1 else "out{k}"
    summary = "; ".join(f"{outputs.format(k=k)} = {_expression(node, names)}"
                        for k, node in enumerate(graph.outputs))
    body = KernelBody(compute=tuple(lowering.lines), compute_slots=lowering.rows.high_water,
                      summary=f"row-wise: {summary}", stat_slots=lowering.stats.high_water)
    return LoweredRows(body=body, inputs=tuple(node.name for node in graph.inputs),
                       outputs=len(graph.outputs), dtype=_dtype_name(graph.inputs[0]),
                       params=tuple(lowering.params))
