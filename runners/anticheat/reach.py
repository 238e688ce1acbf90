"""The forward-path pass: a reachability walk from ModelNew's forward (and what it calls,
stores and passes around) that flags PyTorch, host and reference compute on the way.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from runners.anticheat.findings import FindingSink, ScanClock
from runners.anticheat.model import Held, SourceModule, is_type_argument
from runners.anticheat.nodes import (
    FuncDef,
    const_str,
    flat_targets,
    is_self,
    is_super_call,
    self_attr,
    spelling,
    targets_of,
)
from runners.anticheat.rules import (
    DYNAMIC_REASON,
    FALLBACK,
    FALLBACK_REASON,
    FORWARD_NAMES,
    INHERIT_REASON,
    MATMUL_REASON,
    MAX_MRO,
    NESTING_REASON,
    NN_MODULE_REASON,
    REFERENCE,
    REFERENCE_REASON,
    ROOT_METHODS,
    SKIPPED_METHODS,
    STRUCTURE,
    TENSOR_REASON,
    TORCH_OP,
    StaticCheck,
)
from runners.anticheat.verdicts import (
    is_torch_module_class,
    method_verdict,
    name_verdict,
    scope_verdict,
)


@dataclass
class Unit:
    """A body to scan: a function, a method, a class body, a lambda or a value."""

    key: int
    decorators: list[ast.expr]
    body: Sequence[ast.AST]
    owner: ast.ClassDef | None
    where: str  # how messages name it: "forward", "_launch() (reached from forward)", ...


Work = tuple[ast.AST, bool]  # a node to visit, and whether it runs after a caught error
Found = tuple[ast.ClassDef, FuncDef | None]  # the class defining a name, and its function


class ForwardWalk:
    def __init__(self, mod: SourceModule, model: ast.ClassDef, sink: FindingSink,
                 clock: ScanClock) -> None:
        self.mod = mod
        self.model = model
        self.sink = sink
        self.clock = clock
        self.queue: list[Unit] = []
        self.seen: set[int] = set()
        self.edges: dict[int, set[int]] = {}
        self.dirty: set[int] = set()  # units that compute with PyTorch or the reference
        self.fallback_calls: list[tuple[int, ast.AST, str, str]] = []
        self.unit = Unit(id(model), [], [], model, "the body of class ModelNew")
        self.stack: list[Work] = []
        self.synthetic: dict[tuple[str, int], int] = {}  # keys of expansions and values
        self.derived_cache: dict[int, bool] = {}
        self.torch_base_cache: dict[int, str | None] = {}
        self.mro_cache: dict[int, list[ast.ClassDef]] = {}
        self.index_cache: dict[int, dict[str, FuncDef | None]] = {}
        self.lookup_cache: dict[tuple[int, str], Found | None] = {}
        self.attrs_cache: dict[int, tuple[dict[str, Held], dict[str, list[ast.expr]]]] = {}
        self.own_cache: dict[int, tuple[dict[str, Held], dict[str, list[ast.expr]]]] = {}
        self.handlers: dict[type[ast.AST], Callable[[Any, bool], bool]] = {
            ast.Call: self._on_call,
            ast.Attribute: self._on_attribute,
            ast.Name: self._on_name,
            ast.BinOp: self._on_matmul,
            ast.AugAssign: self._on_matmul,
            ast.ExceptHandler: self._on_handler,
            ast.FunctionDef: self._on_def,
            ast.AsyncFunctionDef: self._on_def,
        }

    # -- driving ------------------------------------------------------------------------

    def run(self) -> None:
        self._roots()
        while self.queue:
            self._walk(self.queue.pop())
        self._report_fallback_calls()

    def _roots(self) -> None:
        for name in ROOT_METHODS:
            found = self._lookup(self.model, name)
            if found is not None and found[1] is not None and found[0].name not in self.mod.refs:
                self._add_unit(found[1], found[0], root=True)
        forward = self._lookup(self.model, "forward")
        if forward is None or forward[0].name in self.mod.refs:
            self._inherited_forward()
        for cls in self._mro(self.model):
            if cls.name not in self.mod.refs:
                body = [s for s in cls.body if not isinstance(s, (ast.FunctionDef,
                                                                   ast.AsyncFunctionDef))]
                self.queue.append(Unit(id(cls), [], body, cls, f"the body of class {cls.name}"))
        self._escaping()

    def _escaping(self) -> None:
        """Code that can run wherever it is passed: lambdas, closures, functions and classes
        used as values. It is scanned as if forward called it."""
        done: set[int] = set()
        for item, owner in self.mod.escaping:
            if id(item) in done:
                continue
            done.add(id(item))
            if isinstance(item, ast.Lambda):
                self._add_value(item.body, owner, f"the lambda at line {item.lineno}")
            elif isinstance(item, ast.ClassDef):
                if item is not self.model and item.name not in self.mod.refs:
                    # __init__ runs where the class is called; forward expands it there
                    self._expand(item, False, item, with_init=False)
            elif id(item) not in self.seen and id(item) not in self.mod.kernels:
                self.seen.add(id(item))
                self.queue.append(Unit(id(item), list(item.decorator_list), item.body, owner,
                                        f"{item.name}() (passed around or nested, it can run "
                                        "anywhere)"))

    def _inherited_forward(self) -> None:
        torch_base = self._torch_base(self.model)
        if self._reference_derived(self.model):
            self.sink.add(REFERENCE, self.model, "ModelNew defines no forward of its own, so it "
                                                 f"runs the reference's: {INHERIT_REASON}")
        elif torch_base is not None:
            self.sink.add(TORCH_OP, self.model, "ModelNew defines no forward of its own, so it "
                                                f"runs {torch_base}.forward: {NN_MODULE_REASON}")

    def _add_unit(self, fn: FuncDef, owner: ast.ClassDef | None, root: bool = False) -> None:
        if id(fn) in self.seen:
            return
        self.seen.add(id(fn))
        if owner is self.model and fn.name == "forward":
            where = "forward"
        else:
            label = f"{owner.name}.{fn.name}" if owner is not None else f"{fn.name}()"
            where = label if root else f"{label} (reached from forward)"
        self.queue.append(Unit(id(fn), list(fn.decorator_list), fn.body, owner, where))

    def _add_value(self, value: ast.expr, owner: ast.ClassDef | None, where: str) -> None:
        """An expression scanned as forward-path code: a lambda's body, a stored value."""
        if id(value) in self.seen:
            return
        self.seen.add(id(value))
        self.queue.append(Unit(id(value), [], [value], owner, where))

    def _key(self, kind: str, node: ast.AST) -> int:
        """A unit key for what is not one node: a class expanded, a name's values."""
        return self.synthetic.setdefault((kind, id(node)), -1 - len(self.synthetic))

    def _edge(self, callee: int, fb: bool, site: ast.AST) -> None:
        self.edges.setdefault(self.unit.key, set()).add(callee)
        if fb:
            self.fallback_calls.append((callee, site, self.unit.where, spelling(site)))

    def _enqueue(self, fn: FuncDef, owner: ast.ClassDef | None, fb: bool, site: ast.AST) -> None:
        self._edge(id(fn), fb, site)
        self._add_unit(fn, owner)

    def _walk(self, unit: Unit) -> None:
        self.unit = unit
        self.stack = [(decorator, False) for decorator in unit.decorators]
        self.stack.extend(self._block([n for n in unit.body if isinstance(n, ast.stmt)], False))
        self.stack.extend((n, False) for n in unit.body if not isinstance(n, ast.stmt))
        while self.stack:
            self.clock.tick()
            node, fb = self.stack.pop()
            handler = self.handlers.get(type(node))
            if handler is None or not handler(node, fb):
                self._push_children(node, fb)

    def _block(self, stmts: list[ast.stmt], fb: bool) -> list[Work]:
        """Statements of a block; those after one that swallowed an error are fallbacks."""
        work: list[Work] = []
        for stmt in stmts:
            work.append((stmt, fb))
            fb = fb or id(stmt) in self.mod.swallowers
        return work

    def _push_children(self, node: ast.AST, fb: bool) -> None:
        for _, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                self.stack.append((value, fb))
            elif isinstance(value, list):
                stmts = [item for item in value if isinstance(item, ast.stmt)]
                self.stack.extend(self._block(stmts, fb))
                self.stack.extend((item, fb) for item in value
                                  if isinstance(item, ast.AST) and not isinstance(item, ast.stmt))

    # -- reporting ----------------------------------------------------------------------

    def _report(self, check: StaticCheck, node: ast.AST, what: str, reason: str,
                fb: bool) -> None:
        if check in (TORCH_OP, REFERENCE):
            self.dirty.add(self.unit.key)
        if fb and check in (TORCH_OP, REFERENCE):
            if not self.sink.has(FALLBACK, node):
                self.sink.add(FALLBACK, node, f"{self.unit.where} {what} after catching an "
                                              f"error: {FALLBACK_REASON}")
        elif not self.sink.has(check, node):
            self.sink.add(check, node, f"{self.unit.where} {what}: {reason}")

    def _report_fallback_calls(self) -> None:
        """Units that reach PyTorch or the reference, through any chain of calls."""
        callers: dict[int, list[int]] = {}
        for caller, callees in self.edges.items():
            for callee in callees:
                callers.setdefault(callee, []).append(caller)
        pending = list(self.dirty)
        while pending:
            for caller in callers.get(pending.pop(), ()):
                if caller not in self.dirty:
                    self.dirty.add(caller)
                    pending.append(caller)
        for key, site, where, shown in self.fallback_calls:
            if key in self.dirty:
                self.sink.add(FALLBACK, site, f"{where} falls back to {shown} after catching an "
                                              "error, and it computes with PyTorch or the "
                                              f"reference: {FALLBACK_REASON}")

    # -- node handlers (True: children handled) -----------------------------------------

    def _on_call(self, node: ast.Call, fb: bool) -> bool:
        func = node.func
        name = self.mod.resolve(func)
        if name is not None:
            self._qualified(name, func, fb, call=True)
            if name == "builtins.getattr":
                self._getattr(node, fb)
        elif isinstance(func, ast.Attribute):
            self._method(func, fb)
        elif isinstance(func, ast.Name):
            self._plain_name(func, fb, call=True)
        else:
            self._other_callee(func, fb)
        self.stack.extend((arg, fb) for arg in node.args)
        self.stack.extend((keyword.value, fb) for keyword in node.keywords)
        return True

    def _on_attribute(self, node: ast.Attribute, fb: bool) -> bool:
        name = self.mod.resolve(node)
        if name is not None:
            self._qualified(name, node, fb, call=False)
            return True
        if is_self(node.value):  # a bound method passed along, e.g. as a callback
            found = self._lookup(self._owner(), node.attr)
            if found is not None and found[1] is not None and found[0].name not in self.mod.refs:
                self._enqueue(found[1], found[0], fb, node)
        return False

    def _on_name(self, node: ast.Name, fb: bool) -> bool:
        if isinstance(node.ctx, ast.Load):
            name = self.mod.resolve(node)
            if name is not None:
                self._qualified(name, node, fb, call=False)
            else:
                self._plain_name(node, fb, call=False)
        return True

    def _on_matmul(self, node: ast.BinOp | ast.AugAssign, fb: bool) -> bool:
        if isinstance(node.op, ast.MatMult):
            self._report(TORCH_OP, node, "multiplies with `@`", MATMUL_REASON, fb)
        return False

    def _on_handler(self, node: ast.ExceptHandler, fb: bool) -> bool:
        if node.type is not None:
            self.stack.append((node.type, fb))
        self.stack.extend(self._block(node.body, True))
        return True

    def _on_def(self, node: FuncDef, fb: bool) -> bool:
        return id(node) in self.mod.kernels  # a nested kernel: its body is kernel code

    # -- what a name or a call means ----------------------------------------------------

    def _qualified(self, name: str, node: ast.AST, fb: bool, call: bool) -> None:
        if name_verdict(name) is not None or (not call and is_type_argument(self.mod, node)):
            return  # the file pass reports it; `isinstance(m, nn.Linear)` computes nothing
        verdict = scope_verdict(name, call, self.mod.refs)
        if verdict is not None:
            verb = "calls" if call else "uses"
            self._report(verdict[0], node, f"{verb} {spelling(node, name)}", verdict[1], fb)

    def _plain_name(self, node: ast.Name, fb: bool, call: bool) -> None:
        ident = node.id
        held = self.mod.instances.get(ident)
        function = self.mod.functions.get(ident)
        if ident in self.mod.refs:
            verb = "calls" if call else "uses"
            self._report(REFERENCE, node, f"{verb} the reference {ident}", REFERENCE_REASON, fb)
        elif function is not None:
            if id(function) not in self.mod.kernels:
                self._enqueue(function, None, fb, node)
        elif ident in self.mod.classes:
            if ident != self.model.name:
                self._expand(self.mod.classes[ident], fb, node, with_init=True)
        elif held is not None:
            self._run_held(held, ident, node, fb)
        elif ident in self.mod.global_values:
            values = self.mod.global_values[ident]
            self._values(self._key("global", values[0]), values, fb, node, owner=None,
                         where=f"the value of {ident} (read on the forward path)")

    def _values(self, key: int, values: list[ast.expr], fb: bool, site: ast.AST, *,
                owner: ast.ClassDef | None, where: str) -> None:
        """Values stored under a name the forward path reads or calls: scanned there too."""
        self._edge(key, fb, site)
        if key in self.seen:
            return
        self.seen.add(key)
        stored = self.edges.setdefault(key, set())
        for value in values:
            stored.add(id(value))
            self._add_value(value, owner, where)

    def _method(self, func: ast.Attribute, fb: bool) -> None:
        value, attr = func.value, func.attr
        if is_super_call(value):
            self._super(attr, func, fb)
            return
        held_attr = self_attr(value)
        if is_self(value):
            self._self_call(attr, func, fb)
        elif held_attr is not None and (attr in FORWARD_NAMES or self._held_kind(held_attr)
                                        == "class"):
            self._held_call(held_attr, func, fb)
        elif not (isinstance(value, ast.Name) and (
                value.id in self.mod.classes or value.id in self.mod.functions)):
            verdict = method_verdict(attr)
            if verdict is not None:
                self._report(verdict[0], func, f"calls {spelling(func)}()", verdict[1], fb)
        self.stack.append((value, fb))

    def _other_callee(self, func: ast.expr, fb: bool) -> None:
        """`kernel[grid](...)` is a launch; `self.layers[0](x)` runs a held module."""
        if isinstance(func, ast.Subscript):
            held_attr = self_attr(func.value)
            if held_attr is not None:
                self._held_call(held_attr, func, fb)
            elif isinstance(func.value, ast.Name) and func.value.id in self.mod.instances:
                self._run_held(self.mod.instances[func.value.id], func.value.id, func, fb)
        self.stack.append((func, fb))

    def _self_call(self, attr: str, node: ast.AST, fb: bool, *, values: bool = True) -> None:
        found = self._lookup(self._owner(), attr)
        if found is None:
            self._held_call(attr, node, fb, values=values)
        elif found[0].name in self.mod.refs and attr in FORWARD_NAMES:
            self._report(REFERENCE, node, f"calls {found[0].name}.{attr} through self",
                         REFERENCE_REASON, fb)
        elif found[1] is not None:
            self._enqueue(found[1], found[0], fb, node)

    def _super(self, attr: str, node: ast.AST, fb: bool) -> None:
        owner = self._owner()
        found = self._lookup_in(self._mro(owner)[1:], attr)
        in_reference = found is not None and found[0].name in self.mod.refs
        torch_base = self._torch_base(owner) if found is None else None
        if attr in FORWARD_NAMES and (in_reference or (
                found is None and self._reference_derived(owner))):
            self._report(REFERENCE, node, f"calls super().{attr}, the reference's",
                         REFERENCE_REASON, fb)
        elif attr in FORWARD_NAMES and torch_base is not None:
            self._report(TORCH_OP, node, f"calls super().{attr}, {torch_base}'s",
                         NN_MODULE_REASON, fb)
        elif found is not None and found[1] is not None:
            self._enqueue(found[1], found[0], fb, node)

    def _held_kind(self, attr: str) -> str | None:
        held = self._attrs(self._owner())[0].get(attr)
        return held[0] if held is not None else None

    def _held_call(self, attr: str, node: ast.AST, fb: bool, *, values: bool = True) -> None:
        owner = self._owner()
        held, stored = self._attrs(owner)
        if attr in held:
            self._run_held(held[attr], f"self.{attr}", node, fb)
        elif values and attr in stored:  # a function, a lambda, a partial, a factory's product
            self._values(self._key(f"self.{attr}", owner), stored[attr], fb, node, owner=owner,
                         where=f"the value of self.{attr} (called on the forward path)")

    def _run_held(self, held: Held, shown: str, node: ast.AST, fb: bool) -> None:
        kind, name = held
        if kind == "class" and name in self.mod.classes:
            self._expand(self.mod.classes[name], fb, node, with_init=False)
        elif kind == "torch":
            self._report(TORCH_OP, node, f"calls {shown}, a {name}", NN_MODULE_REASON
                         + " (pass its .weight/.bias to a kernel instead)", fb)
        elif kind == "reference":
            self._report(REFERENCE, node, f"calls {shown}, an instance of the reference {name}",
                         REFERENCE_REASON, fb)

    def _getattr(self, node: ast.Call, fb: bool) -> None:
        """`getattr(torch, "softmax")`, `getattr(x, "sum")`, `getattr(self, "_launch")`."""
        if len(node.args) < 2:
            return
        obj, key = node.args[0], node.args[1]
        base = self.mod.resolve(obj)
        attr = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
        if base is not None and attr is not None:
            self._qualified(f"{base}.{attr}", node, fb, call=True)
        elif base is not None and base.split(".", 1)[0] in ("torch", "numpy"):
            self._report(TORCH_OP, node, f"calls {spelling(node)}", DYNAMIC_REASON, fb)
        elif attr is not None and is_self(obj):
            parent = self.mod.parents.get(id(node))
            called = isinstance(parent, ast.Call) and parent.func is node
            self._self_call(attr, node, fb, values=called)
        elif attr is not None and method_verdict(attr) is not None:
            self._report(TORCH_OP, node, f"calls {spelling(node)}", TENSOR_REASON, fb)

    def _expand(self, cls: ast.ClassDef, fb: bool, site: ast.AST, with_init: bool) -> None:
        """A helper class named on the forward path: its methods (and bases') run there."""
        key = self._key("init" if with_init else "class", cls)
        self._edge(key, fb, site)
        if key in self.seen:
            return
        self.seen.add(key)
        skipped = SKIPPED_METHODS if with_init else SKIPPED_METHODS | {"__init__", "__new__"}
        methods = self.edges.setdefault(key, set())
        for owner in self._mro(cls):
            if owner.name in self.mod.refs or owner is self.model:
                continue
            for stmt in owner.body:
                if (isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and stmt.name not in skipped and id(stmt) not in self.mod.kernels):
                    methods.add(id(stmt))
                    self._add_unit(stmt, owner)

    # -- classes (each lookup memoised: the scan stays linear in the source) -------------

    def _owner(self) -> ast.ClassDef:
        return self.unit.owner if self.unit.owner is not None else self.model

    def _mro(self, cls: ast.ClassDef) -> list[ast.ClassDef]:
        """cls, then its in-file bases depth first (a close enough linearisation)."""
        if id(cls) in self.mro_cache:
            return self.mro_cache[id(cls)]
        order: list[ast.ClassDef] = []
        seen: set[int] = set()
        stack = [cls]
        while stack:
            current = stack.pop()
            if id(current) in seen:
                continue
            if len(order) == MAX_MRO:
                self.sink.add(STRUCTURE, current, f"class {current.name} is more than {MAX_MRO} "
                                                  f"in-file ancestors above {cls.name}: "
                                                  f"{NESTING_REASON}")
                break
            seen.add(id(current))
            order.append(current)
            bases = [self.mod.classes[base.id] for base in current.bases
                     if isinstance(base, ast.Name) and base.id in self.mod.classes]
            stack.extend(reversed(bases))
        self.mro_cache[id(cls)] = order
        return order

    def _index(self, cls: ast.ClassDef) -> dict[str, FuncDef | None]:
        """What a class body binds: a name -> its function (None for any other binding)."""
        if id(cls) not in self.index_cache:
            index: dict[str, FuncDef | None] = {}
            for stmt in cls.body:  # a later binding wins, as when the body runs
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    index[stmt.name] = stmt
                for target in flat_targets(targets_of(stmt)):
                    if isinstance(target, ast.Name):
                        index[target.id] = None
            self.index_cache[id(cls)] = index
        return self.index_cache[id(cls)]

    def _lookup(self, cls: ast.ClassDef, name: str) -> Found | None:
        key = (id(cls), name)
        if key not in self.lookup_cache:
            self.lookup_cache[key] = self._lookup_in(self._mro(cls), name)
        return self.lookup_cache[key]

    def _lookup_in(self, classes: list[ast.ClassDef], name: str) -> Found | None:
        """The first class defining `name`, and its function (None for a class attribute)."""
        for cls in classes:
            index = self._index(cls)
            if name in index:
                return cls, index[name]
        return None

    def _bases(self, cls: ast.ClassDef) -> Iterator[ast.expr]:
        for current in self._mro(cls):
            yield from current.bases

    def _reference_derived(self, cls: ast.ClassDef) -> bool:
        if id(cls) not in self.derived_cache:
            self.derived_cache[id(cls)] = (
                any(c.name in self.mod.refs for c in self._mro(cls))
                or any(self.mod.is_reference(base) for base in self._bases(cls)))
        return self.derived_cache[id(cls)]

    def _torch_base(self, cls: ast.ClassDef) -> str | None:
        if id(cls) not in self.torch_base_cache:
            names = (self.mod.resolve(base) for base in self._bases(cls))
            self.torch_base_cache[id(cls)] = next(
                (name for name in names if name and is_torch_module_class(name)), None)
        return self.torch_base_cache[id(cls)]

    def _attrs(self, cls: ast.ClassDef) -> tuple[dict[str, Held], dict[str, list[ast.expr]]]:
        """What the methods of cls and its bases store on self: `self.fc = nn.Linear(...)`,
        `self.ref = Model()` (held), and any other value (`self.act = make_act()`)."""
        if id(cls) not in self.attrs_cache:
            held: dict[str, Held] = {}
            values: dict[str, list[ast.expr]] = {}
            for owner in reversed(self._mro(cls)):
                own_held, own_values = self._own_attrs(owner)
                held.update(own_held)
                for name, stored in own_values.items():
                    values.setdefault(name, []).extend(stored)
            self.attrs_cache[id(cls)] = held, values
        return self.attrs_cache[id(cls)]

    def _own_attrs(self, cls: ast.ClassDef) -> tuple[dict[str, Held],
                                                      dict[str, list[ast.expr]]]:
        if id(cls) not in self.own_cache:
            held: dict[str, Held] = {}
            values: dict[str, list[ast.expr]] = {}
            for node in ast.walk(cls):
                self.clock.tick()
                for key, value in self._stores(node):
                    kind = self.mod.held(value)
                    if kind is not None:
                        held[key] = kind
                    else:
                        values.setdefault(key, []).append(value)
            self.own_cache[id(cls)] = held, values
        return self.own_cache[id(cls)]

    def _stores(self, node: ast.AST) -> list[tuple[str, ast.expr]]:
        """`self.x = v`, `setattr(self, "x", v)`, `self.add_module("x", v)` -> [("x", v)]."""
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            names = (self_attr(target) for target in flat_targets(targets_of(node)))
            return [(name, value) for name in names if name is not None]
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            return []
        func, args = node.func, node.args
        if self.mod.resolve(func) == "builtins.setattr" and len(args) == 3 and is_self(args[0]):
            key, value = const_str(args[1]), args[2]
        elif (isinstance(func, ast.Attribute) and is_self(func.value)
              and func.attr in ("add_module", "register_module")):
            key, value = const_str(args[0]), args[1]
        else:
            return []
        return [(key, value)] if key is not None else []
