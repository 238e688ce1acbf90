"""The module model: a candidate's imports, aliases, definitions, kernels and module-level
values, resolved once before the passes read them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from runners.anticheat.findings import ScanClock
from runners.anticheat.nodes import FuncDef, Scoped, flat_targets, spelling, targets_of, top_level
from runners.anticheat.rules import (
    BUILTIN_NAMES,
    KERNEL_DECORATORS,
    KERNEL_PACKAGE,
    KNOWN_MODULES,
    MAX_CHAIN,
    MODEL_CLASS,
    STAR_COMPUTE_NAMES,
)
from runners.anticheat.verdicts import is_torch_module_class, names_reference

# What calling an object stored under a name runs: ("torch" | "reference" | "class", name).
Held = tuple[str, str]


@dataclass
class SourceModule:
    tree: ast.Module
    refs: frozenset[str]
    imports: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    modules: set[str] = field(default_factory=set)  # qualified names bound by `import x`
    star: list[str] = field(default_factory=list)  # modules imported with `*`
    functions: dict[str, FuncDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    kernels: set[int] = field(default_factory=set)  # id() of @triton.jit functions
    kernel_names: set[str] = field(default_factory=set)  # their names, nested ones included
    bound: set[str] = field(default_factory=set)  # names bound to modules or their members
    instances: dict[str, Held] = field(default_factory=dict)  # module-level objects
    # module-level names (and names declared `global`) -> the values assigned to them
    global_values: dict[str, list[ast.expr]] = field(default_factory=dict)
    swallowers: set[int] = field(default_factory=set)  # id() of statements that catch errors
    model: ast.ClassDef | None = None
    nodes: list[ast.AST] = field(default_factory=list)  # every node, parents first
    parents: dict[int, ast.AST] = field(default_factory=dict)  # id(node) -> its parent
    resolved: dict[int, str | None] = field(default_factory=dict)  # resolve()'s memo
    too_long: set[int] = field(default_factory=set)  # chains over MAX_CHAIN names
    # filled by the file pass: code that can run wherever it is passed
    escaping: list[tuple[Scoped, ast.ClassDef | None]] = field(default_factory=list)

    def resolve(self, node: ast.AST) -> str | None:
        """`F.relu` -> "torch.nn.functional.relu"; None for what no import binds."""
        if not isinstance(node, ast.Attribute):
            return self._resolve_name(node.id) if isinstance(node, ast.Name) else None
        if id(node) in self.resolved:
            return self.resolved[id(node)]
        chain: list[ast.Attribute] = []
        current: ast.AST = node
        while isinstance(current, ast.Attribute) and id(current) not in self.resolved:
            chain.append(current)
            current = current.value
        if len(chain) > MAX_CHAIN:  # walked to the end once: every link is memoised below
            self.too_long.add(id(node))
            base = None
        elif isinstance(current, ast.Attribute):
            base = self.resolved[id(current)]
        else:
            base = self._resolve_name(current.id) if isinstance(current, ast.Name) else None
        for link in reversed(chain):
            base = None if base is None else f"{base}.{link.attr}"
            self.resolved[id(link)] = base
        return base

    def _resolve_name(self, name: str) -> str | None:
        if name in self.imports:
            return self.imports[name]
        if name in self.functions or name in self.classes or name in self.instances:
            return None
        if name in BUILTIN_NAMES:
            return f"builtins.{name}"
        star = next((m for m in self.star if m.startswith("torch")), None)
        return f"{star}.{name}" if star and name in STAR_COMPUTE_NAMES else None

    def is_module(self, name: str) -> bool:
        return name in self.modules or name in KNOWN_MODULES

    def is_reference(self, node: ast.AST) -> bool:
        """`Model`, `ref.Model`, `load().Model`: an expression naming the reference."""
        if isinstance(node, ast.Name) and node.id in self.refs:
            return True
        if isinstance(node, ast.Attribute) and node.attr in self.refs:
            return True
        name = self.resolve(node)
        return name is not None and names_reference(name, self.refs)

    def held(self, value: ast.AST) -> Held | None:
        """What an object built by `value` (e.g. `nn.Linear(...)`, `Model()`) runs."""
        if self.is_reference(value):
            return "reference", spelling(value)
        items: list[ast.AST] = []  # `[nn.ReLU(), Helper()]`: what its items run (one level)
        if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
            items = list(value.elts)
        elif isinstance(value, ast.Dict):
            items = list(value.values)
        if items:
            return next((h for h in map(self._held_one, items) if h is not None), None)
        return self._held_one(value)

    def _held_one(self, value: ast.AST) -> Held | None:
        if self.is_reference(value):
            return "reference", spelling(value)
        if not isinstance(value, ast.Call):
            return None
        name = self.resolve(value.func)
        if self.is_reference(value.func):
            return "reference", spelling(value.func)
        if name is not None and is_torch_module_class(name):
            return "torch", name
        func = value.func
        if isinstance(func, ast.Name) and func.id in self.classes:
            return "class", func.id
        return None

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        """The class whose method (or body) holds `node`, if any."""
        current = self.parents.get(id(node))
        while current is not None and not isinstance(current, (ast.ClassDef, ast.Module)):
            current = self.parents.get(id(current))
        return current if isinstance(current, ast.ClassDef) else None


def build_module(tree: ast.Module, refs: frozenset[str], clock: ScanClock) -> SourceModule:
    mod = SourceModule(tree, refs)
    nodes, parents = mod.nodes, mod.parents
    nodes.append(tree)
    for node in nodes:  # breadth first, like ast.walk, noting each node's parent
        clock.tick()
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            nodes.append(child)
    _collect_imports(mod, nodes)
    _collect_top_level(mod)
    mod.resolved.clear()  # aliases made at module level resolve from here on
    _collect_globals(mod, nodes)
    _collect_bound(mod, nodes)
    _collect_kernels(mod, nodes)
    _collect_swallowers(mod, nodes, parents)
    mod.model = _find_model(mod)
    return mod


def is_type_argument(mod: SourceModule, node: ast.AST) -> bool:
    """The class(es) `isinstance(x, ...)` or `issubclass(c, ...)` test against."""
    parent = mod.parents.get(id(node))
    if isinstance(parent, ast.Tuple):
        node, parent = parent, mod.parents.get(id(parent))
    return (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
            and parent.func.id in ("isinstance", "issubclass") and len(parent.args) == 2
            and parent.args[1] is node)


def _collect_imports(mod: SourceModule, nodes: list[ast.AST]) -> None:
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".", 1)[0]
                mod.imports[alias.asname or root] = alias.name if alias.asname else root
                mod.modules.add(alias.name if alias.asname else root)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    mod.star.append(base)
                    continue
                name = f"{base}.{alias.name}" if base else alias.name
                mod.imports[alias.asname or alias.name] = name


def _collect_top_level(mod: SourceModule) -> None:
    for stmt in top_level(mod.tree):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mod.functions[stmt.name] = stmt
        elif isinstance(stmt, ast.ClassDef):
            mod.classes[stmt.name] = stmt
        elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
              and isinstance(stmt.targets[0], ast.Name)):
            _collect_assignment(mod, stmt.targets[0].id, stmt.value)


def _collect_assignment(mod: SourceModule, name: str, value: ast.expr) -> None:
    """`F = torch.nn.functional` is an alias; `_fc = nn.Linear(4, 4)` an object to watch."""
    alias = mod.resolve(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
    held = mod.held(value)
    if alias is not None:
        mod.imports[name] = alias
    elif held is not None:
        mod.instances[name] = held


def _collect_globals(mod: SourceModule, nodes: list[ast.AST]) -> None:
    """Values assigned to module-level names, at module level or under `global`."""
    declared = {name for node in nodes if isinstance(node, ast.Global) for name in node.names}
    top = {id(stmt) for stmt in top_level(mod.tree)}
    for node in nodes:
        value = getattr(node, "value", None)
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) or (
                not isinstance(value, ast.expr)):
            continue
        for target in flat_targets(targets_of(node)):
            if (isinstance(target, ast.Name) and (id(node) in top or target.id in declared)
                    and target.id not in mod.imports and target.id not in mod.instances):
                mod.global_values.setdefault(target.id, []).append(value)


def _collect_bound(mod: SourceModule, nodes: list[ast.AST]) -> None:
    mod.bound.update(mod.imports)
    for node in nodes:
        if isinstance(node, ast.Assign) and mod.resolve(node.value) is not None:
            mod.bound.update(t.id for t in flat_targets(node.targets) if isinstance(t, ast.Name))


def _collect_kernels(mod: SourceModule, nodes: list[ast.AST]) -> None:
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _is_kernel_decorator(mod, dec) for dec in node.decorator_list):
            mod.kernels.add(id(node))
            mod.kernel_names.add(node.name)


def _is_kernel_decorator(mod: SourceModule, decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = mod.resolve(target) or ""
    return (name.split(".", 1)[0] == KERNEL_PACKAGE
            and name.rsplit(".", 1)[-1] in KERNEL_DECORATORS)


def _collect_swallowers(mod: SourceModule, nodes: list[ast.AST],
                        parents: dict[int, ast.AST]) -> None:
    """Mark each statement that contains a handler the code runs on after (in its function)."""
    for node in nodes:
        start: ast.AST | None = None
        if isinstance(node, ast.ExceptHandler) and _falls_through(node.body):
            start = parents.get(id(node))
        elif isinstance(node, (ast.With, ast.AsyncWith)) and any(
                mod.resolve(_call_func(item.context_expr)) == "contextlib.suppress"
                for item in node.items):
            start = node
        while start is not None and not isinstance(
                start, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                        ast.Module)) and id(start) not in mod.swallowers:
            mod.swallowers.add(id(start))
            start = parents.get(id(start))


def _call_func(node: ast.AST) -> ast.AST:
    return node.func if isinstance(node, ast.Call) else node


def _falls_through(body: list[ast.stmt]) -> bool:
    return not body or not isinstance(body[-1], (ast.Raise, ast.Return))


def _find_model(mod: SourceModule) -> ast.ClassDef | None:
    model = mod.classes.get(MODEL_CLASS)
    for stmt in top_level(mod.tree):
        if (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name)
                and any(isinstance(t, ast.Name) and t.id == MODEL_CLASS for t in stmt.targets)):
            model = mod.classes.get(stmt.value.id, model)
    return model
