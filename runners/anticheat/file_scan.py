"""The whole-file pass: loading code, streams and threads, tampering, kernels and
ModelNew's structure, anywhere in the file outside `if __name__ == "__main__":`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from runners.anticheat.findings import FindingSink, ScanClock
from runners.anticheat.model import SourceModule, is_type_argument
from runners.anticheat.nodes import (
    FuncDef,
    const_str,
    flat_targets,
    is_main_guard,
    is_self,
    root_name,
    selects_interpreter,
    spelling,
    targets_of,
    top_level,
)
from runners.anticheat.rules import (
    ATTRIBUTE_RULES,
    DICT_REASON,
    DISPATCH_REASON,
    ENV_REASON,
    HOST_LIBRARY_REASON,
    KERNEL_BUILTINS,
    KERNEL_CALL_REASON,
    KERNEL_PACKAGE,
    MAX_CHAIN,
    MAX_MRO,
    METHOD_RULES,
    MODEL_CLASS,
    MODULE_BASES,
    MODULE_HOOKS,
    MODULE_VALUE_REASON,
    NAMESPACE_BUILTINS,
    NAMESPACE_REASON,
    NESTING_REASON,
    PATCH_REASON,
    REBIND_REASON,
    REFERENCE,
    REFERENCE_REASON,
    REFLECT_REASON,
    REFLECTION_BUILTINS,
    ROOT_METHODS,
    SETATTR_NAMES,
    STRUCTURE,
    STRUCTURE_REASON,
    TAMPER,
    TORCH_OP,
    VALUE_REASON,
)
from runners.anticheat.verdicts import kernel_verdict, name_verdict, reaches_host, value_verdict

KERNEL_BODY = 1  # the node is in a @triton.jit body
ANNOTATION = 2  # the node is in an annotation (never evaluated as code here)
IN_REFERENCE = 4  # the node is in the body of a reference class (the forward pass reads it
# when ModelNew inherits from it, through what it stores on self)


class FileScan:
    def __init__(self, mod: SourceModule, sink: FindingSink, clock: ScanClock) -> None:
        self.mod = mod
        self.sink = sink
        self.clock = clock
        self.closed: set[int] = set()  # nodes whose children are not visited
        self.marks: dict[int, int] = {}  # flags a parent gives one of its children (inherited)
        self.roles: dict[int, str] = {}  # "base" | "decorator": a child's role in its parent
        self.flags_of: dict[int, int] = {}
        self.kernel_of: dict[int, FuncDef] = {}
        self.kernel: FuncDef | None = None  # the kernel the current node is in
        self.flags = 0  # the current node's flags
        self.kernel_locals: dict[int, frozenset[str]] = {}
        self.model_defs: list[ast.ClassDef] = []
        self.top = {id(stmt) for stmt in top_level(mod.tree)}
        self.handlers: dict[type[ast.AST], Callable[[Any], bool]] = {
            ast.Import: self._on_import,
            ast.ImportFrom: self._on_import_from,
            ast.Name: self._on_chain,
            ast.Attribute: self._on_chain,
            ast.Call: self._on_call,
            ast.Assign: self._on_targets,
            ast.AugAssign: self._on_targets,
            ast.AnnAssign: self._on_targets,
            ast.Delete: self._on_targets,
            ast.For: self._on_targets,
            ast.AsyncFor: self._on_targets,
            ast.With: self._on_targets,
            ast.AsyncWith: self._on_targets,
            ast.comprehension: self._on_targets,
            ast.NamedExpr: self._on_targets,
            ast.FunctionDef: self._on_def,
            ast.AsyncFunctionDef: self._on_def,
            ast.Lambda: self._on_lambda,
            ast.ClassDef: self._on_class,
            ast.Global: self._on_global,
        }

    def run(self) -> None:
        """Visit every node once, parents first, skipping what a parent's handler closed."""
        mod = self.mod
        for node in mod.nodes:
            self.clock.tick()
            key = id(node)
            parent = mod.parents.get(key)
            parent_key = id(parent) if parent is not None else 0
            if key in self.closed or parent_key in self.closed:
                self.closed.add(key)
                continue
            kernel = self.kernel_of.get(parent_key)
            flags = self.flags_of.get(parent_key, 0) | self.marks.pop(key, 0)
            if isinstance(node, ast.ClassDef) and node.name in mod.refs:
                flags |= IN_REFERENCE
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and key in mod.kernels:
                kernel = node
                flags &= ~KERNEL_BODY  # its decorators and arguments are not its body
                for stmt in node.body:
                    self.marks[id(stmt)] = self.marks.get(id(stmt), 0) | KERNEL_BODY
            if kernel is not None:
                self.kernel_of[key] = kernel
            if flags:
                self.flags_of[key] = flags
            self.kernel, self.flags = kernel, flags
            handler = self.handlers.get(type(node))
            if is_main_guard(node) or (handler is not None and handler(node)):
                self.closed.add(key)
        self._check_model_statements()

    # -- context ------------------------------------------------------------------------

    @property
    def in_body(self) -> bool:
        return bool(self.flags & KERNEL_BODY)

    def _kernel_says(self, verb: str) -> str:
        return f"kernel {self.kernel.name} {verb}" if self.kernel is not None else verb

    def _mark(self, node: ast.AST | None, flag: int) -> None:
        if node is not None:
            self.marks[id(node)] = self.marks.get(id(node), 0) | flag

    def _parent(self, node: ast.AST) -> ast.AST | None:
        return self.mod.parents.get(id(node))

    def _scope_of(self, node: ast.AST) -> ast.AST | None:
        """The nearest function, lambda, class or module around `node`."""
        current = self._parent(node)
        while current is not None and not isinstance(current, (
                ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)):
            current = self._parent(current)
        return current

    def _locals_of(self, kernel: FuncDef) -> frozenset[str]:
        """A kernel's parameters and the names it assigns."""
        if id(kernel) not in self.kernel_locals:
            args = kernel.args
            names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
            names.update(n.id for n in ast.walk(kernel)
                         if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
            self.kernel_locals[id(kernel)] = frozenset(names)
        return self.kernel_locals[id(kernel)]

    # -- imports ------------------------------------------------------------------------

    def _module_used(self, name: str, node: ast.AST) -> None:
        # torch members (torch.cuda.Event, torch.compile) are flagged where used, not here;
        # but importing a tampering tool (torch._C, torch.overrides) is flagged at once
        verdict = name_verdict(name)
        if name.startswith("torch.") and verdict is not None and verdict[0] != TAMPER:
            verdict = None
        if verdict is not None:
            self.sink.add(verdict[0], node, f"imports {name}: {verdict[1]}")
        parts = name.split(".")
        if (name == "__main__" or parts[-1] in self.mod.refs
                or any("reference" in part.lower() for part in parts)):
            self.sink.add(REFERENCE, node, f"imports {name}: {REFERENCE_REASON}")

    def _on_import(self, node: ast.Import) -> bool:
        for alias in node.names:
            self._module_used(alias.name, node)
            self._binds_model(alias.asname or alias.name.split(".", 1)[0], node, "an import")
        return True

    def _on_import_from(self, node: ast.ImportFrom) -> bool:
        base = node.module or ""
        if base:
            self._module_used(base, node)
        for alias in node.names:
            self._module_used(f"{base}.{alias.name}" if base else alias.name, node)
            self._binds_model(alias.asname or alias.name, node, "an import")
        return True

    # -- names --------------------------------------------------------------------------

    def _on_chain(self, node: ast.Name | ast.Attribute) -> bool:
        if isinstance(node, ast.Attribute) and node.attr in ATTRIBUTE_RULES:
            check, reason = ATTRIBUTE_RULES[node.attr]
            self.sink.add(check, node, f"uses {spelling(node)}: {reason}")
        if not isinstance(node.ctx, ast.Load):
            return False
        name = self.mod.resolve(node)
        if name is None:
            self._on_unresolved(node)
            return False
        verdict = name_verdict(name)
        if verdict is None and self.kernel is not None:
            verdict = kernel_verdict(name)
        if verdict is not None:
            self.sink.add(verdict[0], node, f"{self._kernel_says('uses')} "
                                            f"{spelling(node, name)}: {verdict[1]}")
            if verdict[0] != TORCH_OP and reaches_host(name):
                self.sink.add(TORCH_OP, node, f"reaches {spelling(node, name)}: "
                                              f"{HOST_LIBRARY_REASON}")
        elif not self.flags & ANNOTATION:
            self._on_value(node, name)
        return True

    def _on_unresolved(self, node: ast.Name | ast.Attribute) -> None:
        if id(node) in self.mod.too_long:
            self.sink.add(STRUCTURE, node, f"chains more than {MAX_CHAIN} attribute names: "
                                           f"{NESTING_REASON}")
        if not isinstance(node, ast.Name):
            return
        verdict = ATTRIBUTE_RULES.get(node.id)
        if verdict is not None:
            self.sink.add(verdict[0], node, f"uses {node.id}: {verdict[1]}")
        function = self.mod.functions.get(node.id)
        cls = self.mod.classes.get(node.id)
        parent = self._parent(node)
        if self.flags & IN_REFERENCE:
            return
        if function is not None and id(function) not in self.mod.kernels:
            if self.in_body:
                self.sink.add(TORCH_OP, node, f"{self._kernel_says('uses')} {node.id}, a plain "
                                              f"Python function: {KERNEL_CALL_REASON}")
            elif not (isinstance(parent, ast.Call) and parent.func is node) and (
                    self.roles.get(id(node)) != "decorator"):
                self.mod.escaping.append((function, None))  # passed around as a value
        elif (cls is not None and node.id != MODEL_CLASS and node.id not in self.mod.refs
              and self.roles.get(id(node)) != "base"):
            self.mod.escaping.append((cls, None))

    def _on_value(self, node: ast.Name | ast.Attribute, name: str) -> None:
        """A resolved name used as a value: not called, where the forward pass sees it."""
        parent = self._parent(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return
        if self.mod.is_module(name):
            if not self._module_value_ok(node, parent):
                self.sink.add(TAMPER, node, f"passes the module {spelling(node, name)} around as "
                                            f"a value: {MODULE_VALUE_REASON}")
        elif name in REFLECTION_BUILTINS or name in NAMESPACE_BUILTINS or name == "builtins.dir":
            if not (name == "builtins.getattr" and self._reduces_getattr(node, parent)):
                self.sink.add(TAMPER, node, f"passes {name.removeprefix('builtins.')} around as "
                                            f"a value: {REFLECT_REASON}")
        elif (self.kernel is None and not self.flags & IN_REFERENCE
              and not self._type_argument(node, parent)):
            verdict = value_verdict(name)
            if verdict is not None:
                self.sink.add(verdict[0], node, f"refers to {spelling(node, name)} as a value: "
                                                f"{VALUE_REASON}")

    def _module_value_ok(self, node: ast.AST, parent: ast.AST | None) -> bool:
        """`hasattr(torch, "npu")`, and `F = torch.nn.functional` at module level (an alias)."""
        if isinstance(parent, ast.Call) and parent.args[:1] == [node]:
            probe = self.mod.resolve(parent.func) == "builtins.hasattr"
            return probe and len(parent.args) == 2 and const_str(parent.args[1]) is not None
        return (isinstance(parent, ast.Assign) and id(parent) in self.top
                and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name))

    def _reduces_getattr(self, node: ast.AST, parent: ast.AST | None) -> bool:
        """`functools.reduce(getattr, "a.b".split("."), obj)` on an object, not a module."""
        return (isinstance(parent, ast.Call) and len(parent.args) == 3
                and parent.args[0] is node and not parent.keywords
                and self.mod.resolve(parent.func) == "functools.reduce"
                and self.mod.resolve(parent.args[2]) is None)

    def _type_argument(self, node: ast.AST, parent: ast.AST | None) -> bool:
        """`isinstance(m, nn.Linear)`, `class Helper(torch.autograd.Function)`."""
        return self.roles.get(id(node)) == "base" or is_type_argument(self.mod, node)

    # -- calls --------------------------------------------------------------------------

    def _on_call(self, node: ast.Call) -> bool:
        func = node.func
        name = self.mod.resolve(func)
        if name == "os.environ.setdefault" and selects_interpreter(node):
            return True  # choosing Triton's CPU interpreter when none is chosen is benign
        verdict = METHOD_RULES.get(func.attr) if isinstance(func, ast.Attribute) else None
        if name is None and verdict is not None:
            self.sink.add(verdict[0], node, f"calls {spelling(func)}(): {verdict[1]}")
        if name in SETATTR_NAMES and node.args:
            self._patched(node.args[0], node)
        if name in REFLECTION_BUILTINS:
            self._reflection(node, name.removeprefix("builtins."))
        elif name in NAMESPACE_BUILTINS or (name == "builtins.dir" and node.args
                                            and self.mod.resolve(node.args[0]) is not None):
            self.sink.add(TAMPER, node, f"calls {spelling(node)}: {DICT_REASON}")
        if self.in_body:
            self._kernel_call(node, func, name)
        return False

    def _reflection(self, node: ast.Call, fname: str) -> None:
        """getattr/setattr/delattr/hasattr: a constant name on an object of the file only."""
        args = node.args
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in args) or len(args) < 2:
            self.sink.add(TAMPER, node, f"calls {fname}() with unpacked arguments: "
                                        f"{REFLECT_REASON}")
            return
        obj, key = args[0], args[1]
        attr = const_str(key)
        base = self.mod.resolve(obj)
        if attr is None:
            self.sink.add(TAMPER, node, f"calls {fname}() with a computed name "
                                        f"({spelling(key)}): {REFLECT_REASON}")
        elif attr in ATTRIBUTE_RULES:
            check, reason = ATTRIBUTE_RULES[attr]
            self.sink.add(check, node, f"calls {fname}() on {attr!r}: {reason}")
        elif fname in ("setattr", "delattr") and attr in ROOT_METHODS:
            self.sink.add(STRUCTURE, node, f"rebinds {attr} with {fname}(): {REBIND_REASON}")
        elif base is not None and fname == "hasattr":
            verdict = name_verdict(f"{base}.{attr}")
            if verdict is not None:
                self.sink.add(verdict[0], node, f"probes {base}.{attr}: {verdict[1]}")
        elif base is not None:
            self.sink.add(TAMPER, node, f"calls {fname}({spelling(obj, base)}, {attr!r}) on a "
                                        f"module: {REFLECT_REASON}")

    def _kernel_call(self, node: ast.Call, func: ast.expr, name: str | None) -> None:
        """What a @triton.jit body calls: triton, a few builtins, the file's other kernels."""
        kernel = self.kernel
        if kernel is None:
            return
        if name is not None:
            builtin = name.startswith("builtins.") and name[9:] in KERNEL_BUILTINS
            if not (name.split(".", 1)[0] == KERNEL_PACKAGE or builtin or name_verdict(name)
                    or kernel_verdict(name)):
                self._kernel_bad(node, f"calls {spelling(func, name)}")
            return
        if isinstance(func, ast.Name):
            ident = func.id
            function = self.mod.functions.get(ident)
            local = ident in self._locals_of(kernel)
            if function is not None and not local:
                if id(function) not in self.mod.kernels:
                    self._kernel_bad(node, f"calls {ident}(), a plain Python function")
            elif local:
                self._kernel_bad(node, f"calls {ident}(), a value passed in or computed there")
            elif ident in self.mod.kernel_names and function is None:
                return  # a @triton.jit function defined in a function
            elif ident not in KERNEL_BUILTINS or ident in self.mod.classes or (
                    ident in self.mod.global_values):
                self._kernel_bad(node, f"calls {ident}(), which is not a @triton.jit function")
            return
        root = root_name(func) if isinstance(func, ast.Attribute) else None
        if root is None and isinstance(func, ast.Attribute):
            return  # a method of a computed value: `tl.load(p).to(tl.float32)`
        if root is None:
            self._kernel_bad(node, f"calls {spelling(func)}, a computed callable")
        elif root.id not in self._locals_of(kernel) and (
                root.id in self.mod.functions or root.id in self.mod.classes
                or root.id in self.mod.global_values or root.id in self.mod.instances):
            self._kernel_bad(node, f"calls {spelling(func)}, a method of the module-level "
                                   f"{root.id}")

    def _kernel_bad(self, node: ast.AST, what: str) -> None:
        self.sink.add(TORCH_OP, node, f"{self._kernel_says(what)}: {KERNEL_CALL_REASON}")

    # -- bindings -----------------------------------------------------------------------

    def _on_targets(self, node: ast.AST) -> bool:
        """Assignments and other bindings: report patches, then scan all but patched targets."""
        value = getattr(node, "value", None)
        if isinstance(node, ast.AnnAssign):
            self._mark(node.annotation, ANNOTATION)
        patched: set[int] = set()
        for target in flat_targets(targets_of(node)):
            if isinstance(target, ast.Attribute):
                if self._patched(target, target):
                    patched.add(id(target))
                elif target.attr == "__class__" and is_self(target.value):
                    self.sink.add(STRUCTURE, target, f"assigns {spelling(target)}: it swaps the "
                                                     f"class the checks read")
                elif target.attr == "__class__":
                    self.sink.add(TAMPER, target, f"assigns {spelling(target)}: an object whose "
                                                  f"class is swapped can fake what the checks "
                                                  f"compare")
                elif target.attr in ROOT_METHODS:
                    self.sink.add(STRUCTURE, target, f"assigns {spelling(target)}: {REBIND_REASON}")
            elif isinstance(target, ast.Subscript):
                self._namespace_write(target)
            elif isinstance(target, ast.Name) and target.id == MODEL_CLASS:
                if value is not None and self.mod.is_reference(value):
                    self.sink.add(REFERENCE, node, f"makes ModelNew the reference: "
                                                   f"{REFERENCE_REASON}")
                kind = "deletes" if isinstance(node, ast.Delete) else "binds"
                self.sink.add(STRUCTURE, target, f"{kind} the name ModelNew outside a class "
                                                 f"statement: {STRUCTURE_REASON}")
        self.closed.update(patched)
        return False

    def _binds_model(self, bound: str, node: ast.AST, how: str) -> None:
        if bound == MODEL_CLASS:
            self.sink.add(STRUCTURE, node, f"binds ModelNew with {how}: {STRUCTURE_REASON}")

    def _patched(self, target: ast.expr, node: ast.AST) -> bool:
        """An attribute of a module, the reference or ModelNew assigned from outside."""
        root = root_name(target)
        if root is None:
            return False
        shown = spelling(target, self.mod.resolve(target))
        if root.id in self.mod.bound:
            self.sink.add(TAMPER, node, f"patches {shown}: {PATCH_REASON}")
        elif root.id in self.mod.refs:
            self.sink.add(TAMPER, node, f"patches the reference ({shown}): {PATCH_REASON}")
        elif root.id == MODEL_CLASS or (self.mod.model is not None
                                        and root.id == self.mod.model.name):
            self.sink.add(STRUCTURE, node, f"rebinds {shown} outside the class body: "
                                           f"{REBIND_REASON}")
        else:
            return False
        return True

    def _namespace_write(self, target: ast.Subscript) -> None:
        value = target.value
        name = self.mod.resolve(value)
        if name == "os.environ":
            self.sink.add(TAMPER, target, f"writes {spelling(target)}: {ENV_REASON}")
        elif (isinstance(value, ast.Attribute) and value.attr == "__dict__") or (
                isinstance(value, ast.Call)
                and self.mod.resolve(value.func) in ("builtins.globals", "builtins.vars")):
            self.sink.add(TAMPER, target, f"writes {spelling(target)}: {NAMESPACE_REASON}")

    def _on_global(self, node: ast.Global) -> bool:
        if MODEL_CLASS in node.names:
            self.sink.add(STRUCTURE, node, f"declares ModelNew global in a function, which can "
                                           f"then rebind it: {STRUCTURE_REASON}")
        return True

    # -- definitions --------------------------------------------------------------------

    def _on_def(self, node: FuncDef) -> bool:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.sink.add(TAMPER, node, f"defines {node.name}: {DISPATCH_REASON}")
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            self._mark(arg.annotation if arg is not None else None, ANNOTATION)
        self._mark(node.returns, ANNOTATION)
        self.roles.update((id(decorator), "decorator") for decorator in node.decorator_list)
        self._binds_model(node.name, node, "a def statement")
        if node.name in MODULE_HOOKS and self.mod.functions.get(node.name) is node:
            self.sink.add(STRUCTURE, node, f"defines a module-level {node.name}: it can hand "
                                           f"the harness a ModelNew no class statement defines")
        escapes = self.kernel is None and not self.flags & IN_REFERENCE
        if escapes and isinstance(self._scope_of(node), (ast.FunctionDef, ast.AsyncFunctionDef,
                                                         ast.Lambda)):
            self.mod.escaping.append((node, self.mod.enclosing_class(node)))  # a closure
        return False

    def _on_lambda(self, node: ast.Lambda) -> bool:
        if self.kernel is None and not self.flags & IN_REFERENCE:
            self.mod.escaping.append((node, self.mod.enclosing_class(node)))
        return False

    def _on_class(self, node: ast.ClassDef) -> bool:
        self.roles.update((id(decorator), "decorator") for decorator in node.decorator_list)
        self.roles.update((id(base), "base") for base in node.bases)
        if node.name == MODEL_CLASS:
            self.model_defs.append(node)
        return False

    # -- ModelNew: one plain top-level class statement ----------------------------------

    def _check_model_statements(self) -> None:
        defs = self.model_defs
        for extra in defs[1:]:
            self.sink.add(STRUCTURE, extra, f"defines class ModelNew again (first at line "
                                            f"{defs[0].lineno}): {STRUCTURE_REASON}")
        for cls in defs:
            scope = self._scope_of(cls)
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                where = "inside a function (a factory)"
            elif isinstance(scope, ast.ClassDef):
                where = f"inside class {scope.name}"
            else:
                where = "" if self._parent(cls) is scope else "inside an if/try/with/for block"
            if where:
                self.sink.add(STRUCTURE, cls, f"defines class ModelNew {where}: "
                                              f"{STRUCTURE_REASON}")
            for base in cls.bases:
                name = self.mod.resolve(base)
                allowed = name in MODULE_BASES or (isinstance(base, ast.Name)
                                                   and base.id in self.mod.refs)
                if not allowed:
                    self.sink.add(STRUCTURE, cls, f"derives ModelNew from {spelling(base, name)}: "
                                                  f"{STRUCTURE_REASON} (or the reference's "
                                                  f"Model)")
        model = self.mod.model
        seen: set[int] = set()
        stack = [model] if model is not None else []
        while stack and len(seen) <= MAX_MRO:
            cls = stack.pop()
            if id(cls) in seen:
                continue
            seen.add(id(cls))
            self._plain_class(cls)
            stack.extend(self.mod.classes[base.id] for base in cls.bases
                         if isinstance(base, ast.Name) and base.id in self.mod.classes)

    def _plain_class(self, cls: ast.ClassDef) -> None:
        """No metaclass, class keywords, decorators or subclass hooks on ModelNew or its bases."""
        what = "ModelNew" if cls.name == MODEL_CLASS else f"{cls.name}, a base of ModelNew,"
        for keyword in cls.keywords:
            self.sink.add(STRUCTURE, cls, f"{what} takes {keyword.arg or '**'}=: a metaclass "
                                          f"can rewrite the class after the checks read it")
        for decorator in cls.decorator_list:
            self.sink.add(STRUCTURE, decorator, f"{what} is decorated with {spelling(decorator)}: "
                                                f"a class decorator can replace the class")
        for stmt in cls.body:
            bound = [t.id for t in flat_targets(targets_of(stmt)) if isinstance(t, ast.Name)]
            for name in bound:
                if name in ROOT_METHODS:
                    self.sink.add(STRUCTURE, stmt, f"{what} binds {name} by an assignment, not "
                                                   f"a def: {REBIND_REASON}")
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in (
                    "__init_subclass__", "__class_getitem__", "__set_name__"):
                self.sink.add(STRUCTURE, stmt, f"{what} defines {stmt.name}: it runs as "
                                               f"classes are made and can rewrite ModelNew")
