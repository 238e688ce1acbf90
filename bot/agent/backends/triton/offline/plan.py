"""Which IR values get a buffer of their own, and which kernel computes each.

Pointwise work is fused: a value is recomputed inside whichever kernel needs it, never
stored, unless it must be (a graph output, a reduction's result, a matmul operand that is
not a plain view of a tensor). A matmul absorbs the chain of pointwise ops that alone
consume it (bias, activation): its kernel stores the end of that chain, the epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.agent.offline.graph import Graph, Node

_VIEWABLE = {"permute", "expand", "reshape", "broadcast_in_dim", "slice", "select"}


@dataclass
class Kernel:
    """One kernel launch: `stores` is the node it writes; `kind` picks the template."""

    kind: str  # "pointwise" | "reduce" | "matmul"
    stores: Node
    matmul: Node | None = None  # for "matmul": the product feeding the epilogue


@dataclass
class Plan:
    graph: Graph
    kernels: list[Kernel] = field(default_factory=list)
    stored: set[Node] = field(default_factory=set)
    output_views: dict[Node, Node] = field(default_factory=dict)  # output -> stored root


def view_root(node: Node) -> Node:
    """The first value under a chain of views the launcher can express (itself if none)."""
    current = node
    while current.kind == "view" and current.op in _VIEWABLE:
        current = current.args[0]
    return current


def _epilogue_end(product: Node, outputs: set[Node]) -> Node:
    """Follow single-consumer pointwise ops of the product's shape: the epilogue's end."""
    end = product
    while end not in outputs and len(end.users) == 1:
        user = end.users[0]
        if user.kind != "pointwise" or tuple(user.shape) != tuple(product.shape):
            break
        if sum(1 for arg in user.tensor_args() if arg is end) != 1:
            break  # used twice by one op (x * x): still fine to fuse, but keep it simple
        end = user
    return end


def _store_matmul_operands(graph: Graph, stored: set[Node]) -> None:
    """A matmul reads its operands through strides: each must be a view of a tensor."""
    for node in graph.nodes:
        if node.kind != "matmul":
            continue
        for operand in node.args:
            root = view_root(operand)
            if root.kind != "input" and root not in stored:
                stored.add(root)


def _place_outputs(graph: Graph, plan: Plan, stored: set[Node]) -> None:
    """Outputs get a buffer, unless they are views of one (returned as views)."""
    for output in graph.outputs:
        if output in stored:
            continue
        root = view_root(output)
        if output.kind == "view" and root in stored:
            plan.output_views[output] = root
        else:
            stored.add(output)


def make_plan(graph: Graph) -> Plan:
    plan = Plan(graph=graph)
    outputs = set(graph.outputs)
    absorbed = {_epilogue_end(node, outputs): node for node in graph.nodes
                if node.kind == "matmul"}  # epilogue end -> its matmul
    stored: set[Node] = set(absorbed)
    stored.update(node for node in graph.nodes if node.kind == "reduce")
    _store_matmul_operands(graph, stored)
    _place_outputs(graph, plan, stored)
    plan.stored = stored
    for node in graph.nodes:
        if node not in stored:
            continue
        if node in absorbed:
            plan.kernels.append(Kernel("matmul", node, matmul=absorbed[node]))
        else:
            plan.kernels.append(Kernel("reduce" if node.kind == "reduce" else "pointwise", node))
    return plan
