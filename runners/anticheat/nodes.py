"""Small helpers on AST names and nodes: how the source spells a node, what a statement
binds, the module's top-level statements.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

FuncDef = ast.FunctionDef | ast.AsyncFunctionDef
Scoped = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef


def selects_interpreter(call: ast.Call) -> bool:
    """`os.environ.setdefault("TRITON_INTERPRET", "1")`: a kernel file runnable without a GPU."""
    values = [arg.value if isinstance(arg, ast.Constant) else None for arg in call.args]
    return values == ["TRITON_INTERPRET", "1"] and not call.keywords


def is_dunder(part: str) -> bool:
    return len(part) > 4 and part.startswith("__") and part.endswith("__")


def _is_small(node: ast.AST, limit: int = 48) -> bool:
    """Whether `node` has at most `limit` nodes (counted without walking a large tree)."""
    stack, count = [node], 0
    while stack:
        count += 1
        if count > limit:
            return False
        stack.extend(ast.iter_child_nodes(stack.pop()))
    return True


def _brief(node: ast.AST, depth: int = 3) -> str:
    """How the source spells a node, eliding the inside of a large one (bounded work)."""
    if _is_small(node):
        try:
            return ast.unparse(node)
        except (RecursionError, ValueError, AttributeError):
            return "..."
    if depth == 0:
        return "..."
    if isinstance(node, ast.Call):
        return f"{_brief(node.func, depth - 1)}(...)"
    if isinstance(node, ast.Attribute):
        return f"{_brief(node.value, depth - 1)}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return f"{_brief(node.value, depth - 1)}[...]"
    return "..."


def spelling(node: ast.AST, name: str | None = None) -> str:
    """How the source spells a node (shortened), with its resolved name when different."""
    text = _brief(node)
    text = text if len(text) <= 60 else text[:57] + "..."
    if name is not None and len(name) > 80:
        name = name[:77] + "..."
    return f"{text} ({name})" if name and name != text else text


def is_self(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def self_attr(node: ast.AST) -> str | None:
    """`self.x` -> "x"."""
    return node.attr if isinstance(node, ast.Attribute) and is_self(node.value) else None


def is_super_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "super")


def const_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def root_name(node: ast.AST) -> ast.Name | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node if isinstance(node, ast.Name) else None


def is_main_guard(node: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    sides = [node.test.left, *node.test.comparators]
    names = {side.id for side in sides if isinstance(side, ast.Name)}
    consts = {side.value for side in sides if isinstance(side, ast.Constant)}
    return names == {"__name__"} and consts == {"__main__"}


def flat_targets(targets: Iterable[ast.expr]) -> Iterator[ast.expr]:
    stack = list(targets)
    while stack:
        target = stack.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            stack.extend(target.elts)
        elif isinstance(target, ast.Starred):
            stack.append(target.value)
        else:
            yield target


def targets_of(node: ast.AST) -> list[ast.expr]:
    """What a statement (or a loop, a with item, a comprehension, `:=`) binds."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor,
                         ast.comprehension, ast.NamedExpr)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
    return []


def top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Module statements in order, including those in top-level if/try/with blocks."""
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        stmt = stack.pop()
        yield stmt
        if is_main_guard(stmt):
            continue
        blocks: list[list[ast.stmt]] = []
        if isinstance(stmt, (ast.If, ast.With)):
            blocks = [stmt.body, stmt.orelse] if isinstance(stmt, ast.If) else [stmt.body]
        elif isinstance(stmt, ast.Try):
            blocks = [stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody]
        for block in reversed(blocks):
            stack.extend(reversed(block))
