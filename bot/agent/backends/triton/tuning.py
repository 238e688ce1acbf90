"""Launch-configuration variants of a Triton candidate, for the tuning phase on a device.

A Triton kernel's speed on a GPU turns on three launch knobs the wrapper chooses:
- block sizes: `BLOCK*` constexpr parameters whose value the wrapper fixes as an integer
  literal (a module constant, a constant of the launching function, or a literal launch
  keyword);
- `num_warps`: a literal launch keyword, or none (then Triton's default, 4);
- `num_stages`, for kernels that loop over loads (software pipelining): a literal launch
  keyword, or none (then Triton's default, 3).
(Both defaults: `CUDAOptions` in triton/backends/nvidia/compiler.py, Triton 3.x.)

The knobs are read from the syntax tree, never guessed: a block computed at run time (e.g.
`triton.next_power_of_2(n)`), a `num_warps` held in a variable, a launch that forwards
`**kwargs`, and every kernel decorated with more than `@triton.jit` (`@triton.autotune`
already searches its own configs) are left alone. A variant is the candidate's source with
only the knobs' literals rewritten (or `num_warps=`/`num_stages=` added to a launch);
every other byte stays as written.

Block sizes move in powers of two within limits that keep the kernel's masks right: none
for a kernel with an unmasked load or store (it relies on full blocks), only up for a
block that must cover a whole extent (one the kernel neither steps by nor multiplies a
program index with), never past `MAX_BLOCK`, and a literal launch keyword only when no
other literal in the wrapper could be the same number (a grid sized by hand).

Sites are byte offsets from the syntax tree's line numbers, lines ended as the parser ends
them (\\n, \\r\\n, a lone \\r); a variant whose tokens differ from the draft's anywhere but
at its knobs is dropped all the same. Absurd literals (a 400-digit `num_warps=`) are no knobs,
and a module too big or launching too often to examine cheaply gets no variants.
"""

from __future__ import annotations

import ast
import io
import itertools
import math
import re
import tokenize
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bot.agent.backends.triton.masks import unmasked_accesses

KnobKind = Literal["block", "warps", "stages"]

MAX_VARIANTS = 8  # the loop times at most its tuning budget's first ones
MIN_BLOCK = 16  # tl.dot's smallest tile side; smaller blocks are kept, never made
MAX_BLOCK = 1 << 14
MAX_BLOCK_ELEMENTS = 1 << 16  # one kernel's blocks together: registers, shared memory
MAX_WARPS = 32  # a CTA holds at most 1024 threads: a bigger literal is no knob to tune
MAX_STAGES = 8  # past this the pipeline's buffers overflow shared memory anyway
# Reading is linear in the source, but each variant is rewritten, parsed and tokenized:
# a module past these bounds is no candidate worth tuning (its variants would cost more
# than they could save), so it gets none.
MAX_SOURCE_BYTES = 1 << 17
MAX_LAUNCHES = 128
MAX_TRIES_PER_VARIANT = 4  # rewrites tried (duplicates, unparsable) for each one kept
WARP_CHOICES = (2, 4, 8)
STAGE_CHOICES = (2, 3, 4)
DEFAULT_WARPS = 4
DEFAULT_STAGES = 3
_KIND_ORDER: dict[KnobKind, int] = {"block": 0, "warps": 1, "stages": 2}


@dataclass(frozen=True)
class TritonVariant:
    """One point of the search space: the whole module, and what differs from the draft."""

    label: str  # e.g. "BLOCK_SIZE=2048, num_warps=8"
    source: str
    detail: str  # e.g. "BLOCK_SIZE 1024 -> 2048; num_warps 4 (Triton default) -> 8"


@dataclass(frozen=True)
class _Site:
    """Where a knob's value is written: a literal to replace, or a keyword to add after
    the launch's last argument (`start == end`)."""

    start: int  # byte offsets into the UTF-8 source
    end: int
    keyword: str | None = None  # set for an insertion: ", keyword=value"

    def text(self, value: int) -> str:
        return str(value) if self.keyword is None else f", {self.keyword}={value}"


@dataclass
class _Knob:
    kind: KnobKind
    name: str  # as labels show it: "BLOCK_SIZE", "num_warps"
    current: int
    sites: list[_Site] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # the kernels it configures
    grow_only: bool = False  # a block that covers an extent
    defaulted: bool = False  # no value written: Triton's default applies

    def choices(self) -> list[int]:
        """The values worth timing, nearest to the current one first."""
        if self.kind == "warps":
            options = [value for value in WARP_CHOICES if value != self.current]
        elif self.kind == "stages":
            options = [value for value in STAGE_CHOICES if value != self.current]
        else:
            lowest = min(MIN_BLOCK, self.current)
            steps = (2, 4) if self.grow_only else (2, 0.5, 4, 0.25)
            options = [int(self.current * step) for step in steps]
            options = [value for value in options if lowest <= value <= MAX_BLOCK]
        # log2 of each side, never of their ratio: a ratio underflows to 0 for a huge value.
        return sorted(options, key=lambda value: (
            abs(math.log2(value) - math.log2(self.current)), -value))


# --------------------------------------------------------------------------- reading


def _is_name(node: ast.expr, *names: str) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _dotted(node: ast.expr) -> str:
    """`triton.language.constexpr` as a string; "" for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return f"{owner}.{node.attr}" if owner else ""
    return ""


def _int_literal(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _only_jit(function: ast.FunctionDef, jit_names: set[str]) -> bool:
    """Decorated with `@triton.jit` (or `@jit` imported from triton, or either called
    with options) and nothing else."""
    if len(function.decorator_list) != 1:
        return False
    decorator = function.decorator_list[0]
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return _dotted(target) in {"triton.jit", *jit_names}


def _jit_names(tree: ast.Module) -> set[str]:
    """What `from triton import jit [as name]` binds: a bare `jit` may be numba's."""
    return {alias.asname or alias.name for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.module == "triton"
            for alias in node.names if alias.name == "jit"}


@dataclass(frozen=True)
class _Kernel:
    function: ast.FunctionDef

    @property
    def params(self) -> list[str]:
        arguments = self.function.args
        return [item.arg for item in [*arguments.posonlyargs, *arguments.args]]

    def constexpr(self, name: str) -> bool:
        for item in [*self.function.args.posonlyargs, *self.function.args.args]:
            if item.arg == name and item.annotation is not None:
                return _dotted(item.annotation).endswith("constexpr")
        return False

    def loops_over_loads(self) -> bool:
        """A loop that loads, other than the grid-stride loop over program ids (one trip a
        program on a GPU): what software pipelining (`num_stages`) overlaps."""
        for node in ast.walk(self.function):
            if isinstance(node, ast.For) and not _over_program_ids(node) and \
                    any(_calls(inner, "load") for inner in ast.walk(node)):
                return True
        return False

    def masked(self, unmasked_lines: set[int]) -> bool:
        """No load or store of the kernel goes without a mask."""
        last = self.function.end_lineno or self.function.lineno
        return not any(self.function.lineno <= line <= last for line in unmasked_lines)

    def tiles_by(self, name: str) -> bool:
        """Whether the kernel steps by `name` or multiplies an index with it: then any
        block size covers the extent, masks trimming the last block."""
        for node in ast.walk(self.function):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and any(
                    _is_name(mine, name) and not isinstance(other, ast.Constant)
                    for mine, other in ((node.left, node.right), (node.right, node.left))):
                return True  # e.g. pid * BLOCK, not BLOCK * 2
            if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] in (
                    "range", "static_range") and len(node.args) == 3 and \
                    _is_name(node.args[2], name):
                return True
        return False


def _calls(node: ast.AST, attribute: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == attribute


def _over_program_ids(loop: ast.For) -> bool:
    return isinstance(loop.iter, ast.Call) and bool(loop.iter.args) and \
        any(_calls(inner, "program_id") for inner in ast.walk(loop.iter.args[0]))


@dataclass(frozen=True)
class _Launch:
    call: ast.Call
    kernel: _Kernel
    wrapper: ast.FunctionDef | ast.AsyncFunctionDef


def _binds(node: ast.AST, name: str) -> bool:
    """Whether `node` binds `name`: an assignment, a loop, an import, a parameter..."""
    if isinstance(node, ast.Name):
        return node.id == name and isinstance(node.ctx, ast.Store)
    if isinstance(node, ast.arg):
        return node.arg == name
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return name in node.names
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((alias.asname or alias.name) == name for alias in node.names)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    return False


def _stores(tree: ast.AST, name: str) -> list[ast.AST]:
    """Every binding of `name` under `tree`, nested functions included."""
    return [node for node in ast.walk(tree) if _binds(node, name)]


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of the functions and classes inside it."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                 ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


def _module_bindings(tree: ast.Module, name: str) -> list[ast.AST]:
    """What binds the module-level `name`: module statements (outside functions and
    classes) and `global name` anywhere."""
    found = [node for node in _own_nodes(tree) if _binds(node, name)]
    found += [node for node in ast.walk(tree)
              if isinstance(node, ast.Global) and name in node.names]
    return found


def _literal_assignment(body: Sequence[ast.stmt], name: str) -> ast.Constant | None:
    """The integer literal a top-level statement of `body` gives `name`: `name = N`,
    `name: int = N`, or `..., name, ... = ..., N, ...`."""
    for statement in body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
                len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts, strict=True))
        else:
            pairs = [(target, value)]
        for item, literal in pairs:
            if _is_name(item, name):
                return literal if isinstance(literal, ast.Constant) and \
                    _int_literal(literal) is not None else None
    return None


@dataclass
class _Reader:
    """Finds the knobs of one module."""

    source: str
    tree: ast.Module
    offsets: list[int]  # byte offset of each line's start
    kernels: dict[str, _Kernel]
    knobs: dict[tuple[str, ...], _Knob] = field(default_factory=dict)
    refused: set[tuple[str, ...]] = field(default_factory=set)  # blocks found unsafe
    unmasked_lines: set[int] = field(default_factory=set)  # of tl.load/tl.store calls
    # Per-wrapper answers, computed once: every launch asking again made reading quadratic
    # in the number of launches.
    _literals: dict[tuple[int, str], tuple[ast.Constant, tuple[str, ...], str] | None] = \
        field(default_factory=dict)
    _constants: dict[int, Counter[int]] = field(default_factory=dict)
    _pipelined: dict[str, bool] = field(default_factory=dict)

    def span(self, node: ast.expr) -> tuple[int, int]:
        end_line = node.end_lineno or node.lineno  # ast.parse always sets both ends
        end_column = node.end_col_offset if node.end_col_offset is not None else \
            node.col_offset
        return (self.offsets[node.lineno - 1] + node.col_offset,
                self.offsets[end_line - 1] + end_column)

    def launches(self) -> Iterator[_Launch]:
        """Each launch `kernel[grid](...)` with its innermost enclosing function."""
        for wrapper in ast.walk(self.tree):
            if isinstance(wrapper, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in _own_nodes(wrapper):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                            and isinstance(node.func.value, ast.Name) and \
                            node.func.value.id in self.kernels:
                        yield _Launch(node, self.kernels[node.func.value.id], wrapper)

    def read(self) -> list[_Knob] | None:
        """The knobs found safe; None when the module launches too often to examine."""
        launches = list(itertools.islice(self.launches(), MAX_LAUNCHES + 1))
        if len(launches) > MAX_LAUNCHES:
            return None  # every launch must be seen: an unseen one may forbid a knob
        for launch in launches:
            if any(item.arg is None for item in launch.call.keywords) or \
                    any(isinstance(item, ast.Starred) for item in launch.call.args):
                continue  # forwarded arguments: which knobs they set is unknown
            self._launch_options(launch)
            self._blocks(launch)
        return [knob for key, knob in self.knobs.items() if key not in self.refused]

    def _add(self, key: tuple[str, ...], knob: _Knob, site: _Site, kernel: str) -> None:
        held = self.knobs.setdefault(key, knob)
        held.grow_only = held.grow_only or knob.grow_only
        if site not in held.sites:
            held.sites.append(site)
        if kernel not in held.kernels:
            held.kernels.append(kernel)

    def _launch_options(self, launch: _Launch) -> None:
        options: list[tuple[str, KnobKind, int]] = [("num_warps", "warps", DEFAULT_WARPS)]
        kernel = launch.kernel.function.name
        if kernel not in self._pipelined:
            self._pipelined[kernel] = launch.kernel.loops_over_loads()
        if self._pipelined[kernel]:
            options.append(("num_stages", "stages", DEFAULT_STAGES))
        for keyword, kind, default in options:
            given = [item for item in launch.call.keywords if item.arg == keyword]
            if not given:
                site = self._insertion(launch.call, keyword)
                if site is not None:
                    self._add((kind, str(default), "default"), _Knob(kind, keyword, default,
                                                          defaulted=True), site, kernel)
                continue
            value = _int_literal(given[0].value)
            most = MAX_WARPS if kind == "warps" else MAX_STAGES
            if value is not None and 0 < value <= most:  # an absurd value is no knob
                start, end = self.span(given[0].value)
                self._add((kind, str(value)), _Knob(kind, keyword, value), _Site(start, end),
                          kernel)

    def _insertion(self, call: ast.Call, keyword: str) -> _Site | None:
        arguments: list[ast.expr] = [*call.args, *(item.value for item in call.keywords)]
        if not arguments:
            return None  # a launch with no arguments launches no Triton kernel we know
        last = max(arguments, key=lambda node: (node.end_lineno or 0, node.end_col_offset or 0))
        end = self.span(last)[1]
        return _Site(end, end, keyword)

    def _block_arguments(self, launch: _Launch) -> Iterator[tuple[str, ast.expr]]:
        """(constexpr parameter, the expression passed) for each BLOCK* parameter."""
        params = launch.kernel.params
        passed = list(zip(params, launch.call.args, strict=False))
        passed += [(item.arg, item.value) for item in launch.call.keywords if item.arg]
        for param, value in passed:
            if "BLOCK" in param and launch.kernel.constexpr(param):
                yield param, value

    def _blocks(self, launch: _Launch) -> None:
        kernel = launch.kernel
        masked = kernel.masked(self.unmasked_lines)
        for param, value in self._block_arguments(launch):
            found = self._block_literal(launch, value)
            if found is None:
                continue
            literal, key, name = found
            current = _int_literal(literal)
            if not masked or current is None or not _is_power_of_two(current) or \
                    current > MAX_BLOCK:
                # An unmasked kernel relies on full blocks: whatever sets its block stays.
                self.refused.add(key)
                continue
            start, end = self.span(literal)
            self._add(key, _Knob("block", name if name else param, current,
                                 grow_only=not kernel.tiles_by(param)),
                      _Site(start, end), kernel.function.name)

    def _block_literal(self, launch: _Launch, value: ast.expr
                       ) -> tuple[ast.Constant, tuple[str, ...], str] | None:
        """The literal that fixes a block, with its knob's key and name; None when the
        block is computed at run time or its literal may have a twin elsewhere."""
        wrapper = launch.wrapper
        if isinstance(value, ast.Constant):
            number = _int_literal(value)
            if number is None or self._constant_counts(wrapper)[number] > 1:
                return None  # e.g. a grid written as triton.cdiv(n, 1024)
            return value, ("block", "launch", str(value.lineno), str(value.col_offset)), ""
        if not isinstance(value, ast.Name):
            return None
        key = (id(wrapper), value.id)
        if key not in self._literals:
            self._literals[key] = self._named_literal(wrapper, value.id)
        return self._literals[key]

    def _constant_counts(self, wrapper: ast.AST) -> Counter[int]:
        """How often each integer literal occurs in a wrapper (nested code included)."""
        if id(wrapper) not in self._constants:
            self._constants[id(wrapper)] = Counter(
                number for node in ast.walk(wrapper)
                if (number := _int_literal(node if isinstance(node, ast.expr) else None))
                is not None)
        return self._constants[id(wrapper)]

    def _named_literal(self, wrapper: ast.FunctionDef | ast.AsyncFunctionDef, name: str
                       ) -> tuple[ast.Constant, tuple[str, ...], str] | None:
        local = _literal_assignment(wrapper.body, name)
        if local is not None and len(_stores(wrapper, name)) == 1:
            return local, ("block", "local", wrapper.name, str(wrapper.lineno), name), name
        if _stores(wrapper, name):
            return self._helper_literal(wrapper, name)
        constant = _literal_assignment(self.tree.body, name)
        if constant is not None and len(_module_bindings(self.tree, name)) == 1:
            return constant, ("block", "module", name), name
        return None

    def _helper_literal(self, wrapper: ast.FunctionDef | ast.AsyncFunctionDef, name: str
                        ) -> tuple[ast.Constant, tuple[str, ...], str] | None:
        """A block a launcher helper returns (`block_m, block_n = _blocks(...)`, as the
        offline generator writes): the literal of the helper's last `return`, the one a
        GPU reaches after the interpreter's and the NPU's early returns."""
        bindings = _stores(wrapper, name)
        assignment = next((statement for statement in wrapper.body
                           if isinstance(statement, ast.Assign) and any(
                               _binds(node, name) for target in statement.targets
                               for node in ast.walk(target))), None)
        if len(bindings) != 1 or assignment is None or len(assignment.targets) != 1 or \
                not isinstance(assignment.value, ast.Call) or \
                not isinstance(assignment.value.func, ast.Name):
            return None
        target = assignment.targets[0]
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        if not all(isinstance(item, ast.Name) for item in names):
            return None
        position = [item.id for item in names if isinstance(item, ast.Name)].index(name)
        helper = assignment.value.func.id
        function = next((node for node in self.tree.body if isinstance(node, ast.FunctionDef)
                         and node.name == helper and not node.decorator_list), None)
        if function is None or len(_module_bindings(self.tree, helper)) != 1 or \
                not isinstance(function.body[-1], ast.Return):
            return None
        returned = function.body[-1].value
        values = returned.elts if isinstance(returned, ast.Tuple) else [returned]
        if returned is None or len(values) != len(names) or \
                any(_int_literal(item) is None for item in values):
            return None
        literal = values[position]
        if not isinstance(literal, ast.Constant):
            return None
        return literal, ("block", "helper", helper, str(position)), ""


_LINE_END = re.compile(rb"\r\n|\r|\n")


def _line_offsets(encoded: bytes) -> list[int]:
    """Byte offset of each line's start, lines ended as the parser ends them: by \\n, \\r\\n
    and a lone \\r (anywhere, strings included). Counting \\n alone shifted every offset
    after a lone \\r, so a variant rewrote the wrong bytes."""
    return [0, *(match.end() for match in _LINE_END.finditer(encoded))]


def _reader(source: str) -> _Reader | None:
    try:
        encoded = source.encode("utf-8")
        if len(encoded) > MAX_SOURCE_BYTES:
            return None
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # not Python, or too deeply nested for the parser: no knobs
    jit_names = _jit_names(tree)
    kernels = {node.name: _Kernel(node) for node in tree.body
               if isinstance(node, ast.FunctionDef) and _only_jit(node, jit_names)}
    if not kernels:
        return None  # no kernel, or only autotuned ones (they search their own configs)
    unmasked = {access.line for access in unmasked_accesses(source)}
    return _Reader(source, tree, _line_offsets(encoded), kernels, unmasked_lines=unmasked)


# --------------------------------------------------------------------------- the space


@dataclass(frozen=True)
class _Setting:
    knob: _Knob
    value: int


def _shown(knob: _Knob, value: int, names: dict[str, int]) -> str:
    """`name=value`, with the kernels named when two knobs share a name."""
    where = f" ({', '.join(knob.kernels)})" if names[knob.name] > 1 else ""
    return f"{knob.name}={value}{where}"


def _describe(settings: Sequence[_Setting], names: dict[str, int]) -> tuple[str, str]:
    label = ", ".join(_shown(item.knob, item.value, names) for item in settings)
    changes = "; ".join(
        f"{_shown(item.knob, item.value, names).split('=')[0]} {item.knob.current}"
        f"{' (Triton default)' if item.knob.defaulted else ''} -> {item.value}"
        for item in settings)
    return label, changes


def _footprint(blocks: Sequence[int]) -> int:
    """Elements a kernel's blocks hold at once: the block itself, or each pair's tile
    (a matmul's M x K, K x N and M x N tiles)."""
    if len(blocks) == 1:
        return blocks[0]
    total = sum(blocks)  # the sum over pairs, in linear time: ((sum)^2 - sum of squares) / 2
    return (total * total - sum(block * block for block in blocks)) // 2


def _fits(settings: Sequence[_Setting], knobs: Sequence[_Knob]) -> bool:
    """No kernel's blocks grow past MAX_BLOCK_ELEMENTS (registers, shared memory)."""
    chosen = {id(item.knob): item.value for item in settings}
    for kernel in {kernel for knob in knobs for kernel in knob.kernels}:
        blocks = [knob for knob in knobs if knob.kind == "block" and kernel in knob.kernels]
        if not blocks:
            continue
        before = _footprint([knob.current for knob in blocks])
        after = _footprint([chosen.get(id(knob), knob.current) for knob in blocks])
        if after > max(before, MAX_BLOCK_ELEMENTS):
            return False
    return True


def _scaled(knobs: Sequence[_Knob], factor: float) -> tuple[_Setting, ...]:
    """Every block and warp count scaled by `factor` where its limits allow: bigger tiles
    with more warps keep each thread's share of the work."""
    moved = [(knob, int(knob.current * factor)) for knob in knobs if knob.kind != "stages"]
    settings = tuple(_Setting(knob, value) for knob, value in moved
                     if value in knob.choices())
    kinds = {item.knob.kind for item in settings}
    return settings if kinds == {"block", "warps"} else ()


def _settings(knobs: Sequence[_Knob]) -> Iterator[tuple[_Setting, ...]]:
    """Blocks and warps scaled up together; then one knob moved at a time, round-robin
    (each knob's nearest value first); then blocks and warps scaled down together."""
    bigger = _scaled(knobs, 2)
    if bigger:
        yield bigger
    choices = [knob.choices() for knob in knobs]
    for rank in range(max((len(items) for items in choices), default=0)):
        for knob, items in zip(knobs, choices, strict=True):
            if rank < len(items):
                yield (_Setting(knob, items[rank]),)
    smaller = _scaled(knobs, 0.5)
    if smaller:
        yield smaller


def _rewrite(source: str, settings: Sequence[_Setting]) -> str | None:
    """The source with each site rewritten, in one pass; None when sites overlap."""
    encoded = source.encode("utf-8")
    edits = sorted(((site, item.value) for item in settings for site in item.knob.sites),
                   key=lambda edit: edit[0].start)
    pieces: list[bytes] = []
    done = 0
    for site, value in edits:
        if site.start < done:
            return None
        pieces += [encoded[done:site.start], site.text(value).encode("utf-8")]
        done = site.end
    pieces.append(encoded[done:])
    try:
        return b"".join(pieces).decode("utf-8")
    except UnicodeDecodeError:
        return None  # a site cut a character: offsets were wrong


_Token = tuple[int, str]
_INSERTED = {"num_warps", "num_stages"}


def _tokens(source: str) -> list[_Token] | None:
    """The token stream (kind, text), newlines read as the parser reads them."""
    try:
        return [(token.type, token.string) for token in
                tokenize.generate_tokens(io.StringIO(source, newline=None).readline)]
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _is_insertion(tokens: list[_Token], values: set[str]) -> bool:
    """`, num_warps=8`, or `num_warps=8,` where the launch ended with a trailing comma."""
    comma = (tokenize.OP, ",")
    if tokens[:1] == [comma]:
        keyword = tokens[1:4]
    elif tokens[3:4] == [comma]:
        keyword = tokens[:3]
    else:
        return False
    return len(keyword) == 3 and keyword[0][0] == tokenize.NAME and \
        keyword[0][1] in _INSERTED and keyword[1] == (tokenize.OP, "=") and \
        keyword[2][0] == tokenize.NUMBER and keyword[2][1] in values


def _only_knobs_differ(before: Sequence[_Token], variant: str,
                       settings: Sequence[_Setting]) -> bool:
    """Defence in depth: the variant's tokens are the original's but for one changed
    number or one inserted `, num_*=N` per site, each the value of a setting."""
    after = _tokens(variant)
    if after is None:
        return False
    values = {str(item.value) for item in settings}
    expected = sum(len(item.knob.sites) for item in settings)
    old = new = changes = 0
    while old < len(before) and new < len(after):
        if before[old] == after[new]:
            old, new = old + 1, new + 1
        elif before[old][0] == after[new][0] == tokenize.NUMBER and after[new][1] in values:
            old, new, changes = old + 1, new + 1, changes + 1
        elif _is_insertion(after[new:new + 4], values):
            new, changes = new + 4, changes + 1
        else:
            return False
    return old == len(before) and new == len(after) and changes == expected


def tuning_variants(source: str, *, limit: int = MAX_VARIANTS) -> list[TritonVariant]:
    """Up to `limit` launch-configuration variants of a Triton module, best guesses first;
    [] when it has no knob this module can set safely (or does not parse)."""
    reader = _reader(source)
    found = None if reader is None or limit <= 0 else reader.read()
    original = _tokens(source) if found else None
    if not found or original is None:
        return []
    knobs = sorted(found, key=lambda knob: (_KIND_ORDER[knob.kind], knob.sites[0].start))
    names: dict[str, int] = {}
    for knob in knobs:
        names[knob.name] = names.get(knob.name, 0) + 1
    variants: list[TritonVariant] = []
    seen = {source}
    tries = limit * MAX_TRIES_PER_VARIANT
    for settings in _settings(knobs):
        if not _fits(settings, knobs):
            continue
        tries -= 1
        if tries < 0:
            break
        text = _rewrite(source, settings)
        if text is None or text in seen or not _parses(text) or \
                not _only_knobs_differ(original, text, settings):
            continue
        seen.add(text)
        label, detail = _describe(settings, names)
        variants.append(TritonVariant(label=label, source=text, detail=detail))
        if len(variants) == limit:
            break
    return variants


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True
