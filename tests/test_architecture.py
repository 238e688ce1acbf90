"""Architecture rules, checked on the source of bot/ and runners/ with `ast`:

(a) no import circles: every import counts, at module level or inside a function (a
    function-level import only hides a circle), relative imports resolved, and
    `from pkg import module` counted as importing the module;
(b) layers depend one way: runners never import the bot, the forge layer (bot/forge)
    never imports runners, and a backend package (bot/agent/backends/<x>/) never imports
    another one;
(c) only a backend's or forge's own code knows its name: outside bot/agent/backends/ and
    bot/forge/, no comparison (==, !=, in, or a match case) with "triton", "ascendc",
    "github" or "gitlab".

Each checker is shown to work on a small synthetic tree first, then run on the real one.
Importing a.b.c also runs a/__init__ and a/b/__init__; those implicit imports are not
edges here (a registry package importing its own subpackages would otherwise always be a
circle), only the import statements written in the source are.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "runners")
BRANCH_NAMES = frozenset({"triton", "ascendc", "github", "gitlab"})
NAME_HOMES = ("bot.agent.backends", "bot.forge")  # where those names may be compared
BACKENDS = "bot.agent.backends"


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Module:
    name: str  # dotted: bot.agent.offline.job; a package is named by its __init__
    path: str  # relative to the scanned root, for messages
    is_package: bool
    tree: ast.Module


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int


def load_modules(root: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            source = path.read_text(encoding="utf-8")
            relative = path.relative_to(root).as_posix()
            modules[name] = Module(name, relative, is_package,
                                   ast.parse(source, filename=relative))
    return modules


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _known_prefix(name: str, modules: Mapping[str, Module]) -> str | None:
    """The longest prefix of a dotted name that is one of ours (None: a third party's)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _from_base(module: Module, node: ast.ImportFrom) -> str:
    """The absolute module a `from X import ...` reads from, relative levels resolved."""
    if node.level == 0:
        return node.module or ""
    package = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    anchor = package[:len(package) - (node.level - 1)]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def _targets(module: Module, node: ast.AST, modules: Mapping[str, Module]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            found = _known_prefix(alias.name, modules)
            if found is not None:
                yield found
    elif isinstance(node, ast.ImportFrom):
        base = _from_base(module, node)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            found = submodule if submodule in modules else _known_prefix(base, modules)
            if found is not None:
                yield found


def import_edges(modules: Mapping[str, Module]) -> list[Edge]:
    """Every import of one of our modules by another, wherever the statement stands."""
    edges: dict[tuple[str, str], Edge] = {}
    for module in modules.values():
        for node in ast.walk(module.tree):
            for target in _targets(module, node, modules):
                key = (module.name, target)
                line = getattr(node, "lineno", 0)
                if target != module.name and (key not in edges or edges[key].line > line):
                    edges[key] = Edge(module.name, target, line)
    return sorted(edges.values(), key=lambda edge: (edge.importer, edge.imported))


# --------------------------------------------------------------------------- (a) circles


def strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def import_circles(root: Path) -> list[str]:
    modules = load_modules(root)
    edges = import_edges(modules)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in edges:
        graph[edge.importer].add(edge.imported)
    findings = []
    for component in strongly_connected(graph):
        if len(component) < 2:
            continue
        members = set(component)
        inside = [f"{modules[edge.importer].path}:{edge.line} imports {edge.imported}"
                  for edge in edges if edge.importer in members and edge.imported in members]
        findings.append(
            f"import circle among {', '.join(component)} ({'; '.join(inside)}). Break it: "
            "move what both sides need (shared types, small helpers) into a module of its "
            "own that imports neither; moving an import into a function does not count.")
    return findings


# --------------------------------------------------------------------------- (b) layering


def _backend_package(name: str, modules: Mapping[str, Module]) -> str | None:
    """bot.agent.backends.<x> when `name` lies in that backend package (a directory)."""
    parts = name.split(".")
    if not _under(name, BACKENDS) or len(parts) < 4:
        return None
    package = ".".join(parts[:4])
    return package if package in modules and modules[package].is_package else None


def _layering_break(edge: Edge, modules: Mapping[str, Module]) -> str | None:
    where = f"{modules[edge.importer].path}:{edge.line}: {edge.importer} imports {edge.imported}"
    if _under(edge.importer, "runners") and _under(edge.imported, "bot"):
        return (f"{where}, but runners must not depend on the bot (runners run where the "
                "bot is not installed): move what it needs into runners/, or have the bot "
                "pass it in.")
    if _under(edge.importer, "bot.forge") and _under(edge.imported, "runners"):
        return (f"{where}, but the forge layer only talks to GitHub/GitLab: do the runner "
                "work in the caller (bot/) and hand the forge plain data.")
    mine = _backend_package(edge.importer, modules)
    theirs = _backend_package(edge.imported, modules)
    if mine is not None and theirs is not None and mine != theirs:
        return (f"{where}, but backends are independent of each other: move the shared "
                "piece out of both, into bot/agent/ (or bot/agent/backends/base.py).")
    return None


def layering_breaks(root: Path) -> list[str]:
    modules = load_modules(root)
    return [message for edge in import_edges(modules)
            if (message := _layering_break(edge, modules)) is not None]


# --------------------------------------------------------------------------- (c) name branches


def _branch_names(node: ast.AST) -> list[str]:
    """The backend/forge names a comparison operand spells out (also inside a tuple)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in BRANCH_NAMES else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [name for element in node.elts for name in _branch_names(element)]
    return []


def _compared_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Compare):
        return [name for operand in (node.left, *node.comparators)
                for name in _branch_names(operand)]
    if isinstance(node, ast.MatchValue):  # `case "triton":` is the same branch
        return _branch_names(node.value)
    return []


def name_branches(root: Path) -> list[str]:
    findings = []
    for module in load_modules(root).values():
        if any(_under(module.name, home) for home in NAME_HOMES):
            continue
        for node in ast.walk(module.tree):
            names = _compared_names(node)
            if names:
                line = getattr(node, "lineno", 0)
                findings.append(f"{module.path}:{line}: `{ast.unparse(node)}` branches on "
                                f"the name {names[0]!r}")
    return findings


NAME_BRANCH_ADVICE = (
    "Only a backend's or forge's own package may compare its name. Ask the object instead: "
    "the backend (bot.agent.backends.get_backend(name), its AgentBackend Protocol) or the "
    "forge (bot/forge/); add a method or attribute there if none fits, so a new backend or "
    "forge needs no edit in these places:")


# --------------------------------------------------------------------------- synthetic trees


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for package in PACKAGES:
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").touch()
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            if parent != Path("."):
                (root / parent / "__init__.py").touch()
        path.write_text(text, encoding="utf-8")
    return root


Check = Callable[[Path], list[str]]


def _one_finding(check: Check, root: Path, *expected: str) -> str:
    findings = check(root)
    assert len(findings) == 1, findings
    for text in expected:
        assert text in findings[0], findings[0]
    return findings[0]


def test_a_module_level_circle_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"bot/a.py": "import bot.b\n", "bot/b.py": "from bot import a\n",
                            "bot/c.py": "import bot.a\n"})
    message = _one_finding(import_circles, root, "bot.a, bot.b", "bot/a.py:1 imports bot.b",
                           "bot/b.py:1 imports bot.a")
    assert "bot.c" not in message.split("(")[0]  # c imports into the circle, is not in it


def test_a_circle_through_a_function_level_relative_import_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "bot/pkg/emit.py": "from bot.pkg.ops import code\n",
        "bot/pkg/ops.py": "def code():\n    from .emit import Value\n    return Value\n",
    })
    _one_finding(import_circles, root, "bot.pkg.emit, bot.pkg.ops", "bot/pkg/ops.py:2")


def test_a_circle_through_a_package_init_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"bot/reg/__init__.py": "from .impl import thing\n",
                            "bot/reg/impl.py": "from .. import reg\nthing = 1\n"})
    _one_finding(import_circles, root, "bot.reg, bot.reg.impl")


def test_an_acyclic_tree_has_no_circle(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"bot/a.py": "import bot.b\nimport torch\n",
                            "bot/b.py": "from bot.c import x\n", "bot/c.py": "x = 1\n",
                            "runners/r.py": "import os\n"})
    assert import_circles(root) == []


def test_runners_importing_the_bot_is_a_layering_break(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"bot/spec.py": "", "runners/harness.py":
                            "def f():\n    from bot.spec import x\n"})
    _one_finding(layering_breaks, root, "runners/harness.py:2", "runners must not depend")


def test_the_forge_importing_runners_is_a_layering_break(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"bot/forge/github.py": "import runners.base\n",
                            "runners/base.py": ""})
    _one_finding(layering_breaks, root, "bot.forge.github imports runners.base")


def test_one_backend_importing_another_is_a_layering_break(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "bot/agent/backends/base.py": "",
        "bot/agent/backends/triton/prompts.py": "from bot.agent.backends import base\n",
        "bot/agent/backends/ascendc/prompts.py":
            "from ..triton.prompts import fence\nfrom bot.agent.backends import base\n",
    })
    _one_finding(layering_breaks, root, "bot.agent.backends.ascendc.prompts imports "
                 "bot.agent.backends.triton.prompts", "backends are independent")


def test_allowed_directions_are_no_layering_break(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "runners/base.py": "", "bot/jobs.py": "import runners.base\n",
        "bot/forge/gitlab.py": "from bot.forge import base\n", "bot/forge/base.py": "",
        "bot/agent/backends/__init__.py": "from .triton import T\nfrom .ascendc import A\n",
        "bot/agent/backends/triton/__init__.py": "import runners.base\nT = 1\n",
        "bot/agent/backends/ascendc/__init__.py": "from bot.agent.offline import job\nA = 1\n",
        "bot/agent/offline/job.py": "",
    })
    assert layering_breaks(root) == []


@pytest.mark.parametrize("code", [
    'if backend == "triton":\n    pass\n',
    'ok = "ascendc" != name\n',
    'ok = forge in ("github", "gitlab")\n',
    'ok = forge not in {"gitlab"}\n',
    'match name:\n    case "ascendc":\n        pass\n',
])
def test_a_name_branch_outside_the_homes_is_found(tmp_path: Path, code: str) -> None:
    root = _tree(tmp_path, {"bot/agent/loop.py": code})
    _one_finding(name_branches, root, "bot/agent/loop.py:", "branches on the name")


def test_names_may_be_compared_at_home_and_other_strings_anywhere(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "bot/agent/backends/__init__.py": 'x = name == "triton"\n',
        "bot/agent/backends/ascendc/flags.py": 'x = name in ("ascendc", "triton")\n',
        "bot/forge/__init__.py": 'x = kind == "gitlab"\n',
        "bot/cli.py": 'x = llm == "offline"\nREGISTRY = {"triton": 1}\nlabel = "github"\n',
    })
    assert name_branches(root) == []


# --------------------------------------------------------------------------- the real tree


def _report(findings: list[str], advice: str = "") -> str:
    return "\n".join(["", *([advice] if advice else []), *findings])


def test_no_import_circles() -> None:
    findings = import_circles(ROOT)
    assert not findings, _report(findings)


def test_layers_depend_one_way() -> None:
    findings = layering_breaks(ROOT)
    assert not findings, _report(findings)


def test_no_backend_or_forge_name_branches_outside_their_homes() -> None:
    findings = name_branches(ROOT)
    assert not findings, _report(findings, NAME_BRANCH_ADVICE)
