"""Checks a drafted Ascend C package gets before any compiler runs: the lint and the tiling
simulator (runners/ascendc/lint.py, runners/ascendc/tiling.py). Both need no CANN, so the
model hears about unbalanced queues, forbidden headers or a UB overflow in seconds, and
a runner never spends a build on them.

The tiling check reads the constants the model's tiling header and kernel declare, plans
each problem as the header's ComputeTiling would (plan_tiling mirrors it) and replays that
plan against what the kernel allocates: a header that sizes tiles for fewer buffers or
scratch slots than the kernel uses shows up as a UB overflow, with the numbers.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from bot.agent.backends.ascendc.skeleton import Skeleton
from bot.spec import OpSpec
from runners.ascendc.lint import lint_package
from runners.ascendc.package import KERNEL_DTYPES, TAIL_SIZES, PackageError, compute_slots_of
from runners.ascendc.tiling import (
    BUFFER_NUM,
    UB_BYTES_DAV_2201,
    UB_RESERVED_BYTES,
    CopyKind,
    RowTilingConfig,
    TilingConfig,
    check_row_tiling,
    check_tiling,
    plan_rows,
    plan_tiling,
    scratch_bytes,
)

# Vector core counts to simulate: a small part and a full Atlas A2 (24 AI Cores x 2 AIV).
SIMULATED_CORES = (8, 48)
LARGE_PROBLEM = 1 << 24  # many tiles per core
_HEADER_CONSTANTS = ("BUFFER_NUM", "UB_RESERVED_BYTES", "NUM_INPUTS", "NUM_OUTPUTS",
                     "COMPUTE_SLOTS")
_CONSTANT = re.compile(r"\bconstexpr\s+[\w:]+\s+(?P<name>\w+)\s*=\s*(?P<value>[^;]+);")
_MAX_TILING_PROBLEMS = 6


@dataclass(frozen=True)
class StaticVerdict:
    errors: tuple[str, ...]
    warnings: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.errors

    def feedback(self) -> str:
        lines = ["opbot's static checks (lint and tiling simulation, before any build) "
                 f"found {len(self.errors)} error(s):",
                 *("- " + item.replace("\n", "\n  ") for item in self.errors)]
        if self.warnings:
            lines += ["Warnings:", *(f"- {item}" for item in self.warnings)]
        return "\n".join(lines)


_OPERATORS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.LShift: operator.lshift,
}


def _evaluate(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if left is None or right is None or (isinstance(node.op, ast.FloorDiv) and not right):
            return None
        return _OPERATORS[type(node.op)](left, right)
    return None


def _integer(expression: str) -> int | None:
    """A constant's value when it is integer arithmetic (`8 * 1024 + 256`), else None."""
    text = re.sub(r"(?<=\d)[uUlL]+\b", "", expression.strip()).replace("/", "//")
    try:
        return _evaluate(ast.parse(text, mode="eval").body)
    except SyntaxError:
        return None


def constants(source: str) -> dict[str, int]:
    """`constexpr <type> NAME = <integer arithmetic>;` declarations, by name."""
    found: dict[str, int] = {}
    for match in _CONSTANT.finditer(source):
        value = _integer(match["value"])
        if value is not None:
            found.setdefault(match["name"], value)
    return found


@dataclass(frozen=True)
class _Side:
    """What one side (the host's plan, or the kernel's allocation) assumes."""

    buffer_num: int
    inputs: int
    outputs: int
    compute_slots: int
    reserved: int
    # Caps a tuned tiling header adds (bot/agent/backends/ascendc/tuning.py).
    tile_cap: int | None = None
    core_cap: int | None = None

    def config(self, total: int, dtype_bytes: int, cores: int, copy: CopyKind) -> TilingConfig:
        return TilingConfig(
            total=total, dtype_bytes=dtype_bytes, cores=cores, ub_bytes=UB_BYTES_DAV_2201,
            buffer_num=self.buffer_num, queues=self.inputs + self.outputs,
            scratch_bytes_per_element=scratch_bytes(self.compute_slots, inputs=self.inputs,
                                                    outputs=self.outputs,
                                                    dtype_bytes=dtype_bytes),
            reserved_bytes=self.reserved, copy=copy, tile_cap=self.tile_cap,
            core_cap=self.core_cap)


def _sides(skeleton: Skeleton) -> tuple[_Side, _Side, list[str]]:
    """(host, kernel, problems): the header's and the kernel's assumptions."""
    kernel_text = skeleton.text(skeleton.kernel_name)
    header_name = skeleton.writable[1]
    header = constants(skeleton.text(header_name))
    problems = [f"{header_name}: no `constexpr` {name} (the tiling contract needs it)"
                for name in _HEADER_CONSTANTS if name not in header]
    for symbol in ("TilingData", "ComputeTiling", f"namespace {skeleton.op}_tiling"):
        if symbol not in skeleton.text(header_name):
            problems.append(f"{header_name}: no {symbol} (the CPU twin and the binding use it)")
    kernel_slots = compute_slots_of(kernel_text)
    kernel = _Side(buffer_num=constants(kernel_text).get("BUFFER_NUM", BUFFER_NUM),
                   inputs=len(skeleton.inputs), outputs=skeleton.outputs,
                   compute_slots=kernel_slots, reserved=UB_RESERVED_BYTES)
    host = _Side(buffer_num=header.get("BUFFER_NUM", kernel.buffer_num),
                 inputs=header.get("NUM_INPUTS", kernel.inputs),
                 outputs=header.get("NUM_OUTPUTS", kernel.outputs),
                 compute_slots=header.get("COMPUTE_SLOTS", kernel_slots),
                 reserved=header.get("UB_RESERVED_BYTES", UB_RESERVED_BYTES),
                 tile_cap=header.get("MAX_TILE_LENGTH"), core_cap=header.get("MAX_CORES"))
    for what, planned, used in (("BUFFER_NUM", host.buffer_num, kernel.buffer_num),
                                ("NUM_INPUTS", host.inputs, kernel.inputs),
                                ("NUM_OUTPUTS", host.outputs, kernel.outputs),
                                ("COMPUTE_SLOTS", host.compute_slots, kernel.compute_slots)):
        if planned != used:
            problems.append(f"{header_name}: {what} = {planned}, but the kernel uses {used}: "
                            "the host would size tiles for a different UB budget")
    return host, kernel, problems


def _copy_kind(kernel_text: str) -> CopyKind:
    code = re.sub(r"//[^\n]*", "", kernel_text)
    return "plain" if "DataCopy(" in code and "DataCopyPad(" not in code else "pad"


def problem_sizes(spec: OpSpec) -> list[int]:
    """Elements per tensor of every spec case, the odd tails, and one large problem."""
    sizes: list[int] = []
    for case in spec.cases():
        tensors = [item for item in case.to_json()["inputs"] if item["kind"] == "tensor"]
        if tensors:
            count = 1
            for dim in tensors[0]["shape"]:
                count *= int(dim)
            sizes.append(count)
    return list(dict.fromkeys([*sizes, *TAIL_SIZES, LARGE_PROBLEM]))


def _tiling_reports(skeleton: Skeleton, sizes: Sequence[int], host: _Side,
                    kernel: _Side) -> Iterator[str]:
    copy = _copy_kind(skeleton.text(skeleton.kernel_name))
    for dtype in skeleton.dtypes:
        dtype_bytes = KERNEL_DTYPES[dtype].size
        for cores in SIMULATED_CORES:
            for total in sizes:
                plan = plan_tiling(host.config(total, dtype_bytes, cores, copy))
                report = check_tiling(kernel.config(total, dtype_bytes, cores, copy), plan)
                if not report.ok:
                    yield f"{dtype} {report.feedback()}"


def tiling_problems(skeleton: Skeleton, sizes: Sequence[int]) -> list[str]:
    """The contract's constants, then the simulated plans that break a rule."""
    try:
        host, kernel, problems = _sides(skeleton)
    except PackageError as exc:
        return [f"{skeleton.kernel_name}: {exc}"]
    seen: set[str] = set()
    for text in _tiling_reports(skeleton, sizes, host, kernel):
        # One report per distinct set of violations: the same overflow at every size is one.
        key = "\n".join(text.splitlines()[1:])
        if key not in seen:
            seen.add(key)
            problems.append(text)
        if len(problems) >= _MAX_TILING_PROBLEMS:
            break
    return problems


def row_tiling_problems(skeleton: Skeleton, shapes: Sequence[tuple[int, int]]) -> list[str]:
    """The row pattern: the header's constants against the kernel's, then every (rows, row
    length) planned as the header's ComputeTiling does (plan_rows mirrors it) and checked:
    each row on one core, and a row that fits in UB with what the kernel allocates."""
    kernel_text = skeleton.text(skeleton.kernel_name)
    header_name = skeleton.writable[1]
    header = constants(skeleton.text(header_name))
    kernel = constants(kernel_text)
    problems = [f"{header_name}: no `constexpr` {name} (the row tiling contract needs it)"
                for name in (*_HEADER_CONSTANTS, "NUM_PARAMS", "STAT_SLOTS")
                if name not in header]
    expected = {"NUM_INPUTS": len(skeleton.inputs), "NUM_OUTPUTS": skeleton.outputs,
                "NUM_PARAMS": len(skeleton.params)}
    for name in ("BUFFER_NUM", "COMPUTE_SLOTS", "STAT_SLOTS", *expected):
        used = kernel.get(name, expected.get(name))
        if name in header and used is not None and header[name] != used:
            problems.append(f"{header_name}: {name} = {header[name]}, but the kernel uses "
                            f"{used}: the host would size UB for a different row budget")
    if problems:
        return problems
    for dtype in skeleton.dtypes:
        for cores in SIMULATED_CORES:
            for rows, length in shapes:
                config = RowTilingConfig(
                    rows=rows, row_length=length, dtype_bytes=KERNEL_DTYPES[dtype].size,
                    cores=cores, inputs=kernel.get("NUM_INPUTS", len(skeleton.inputs)),
                    params=kernel.get("NUM_PARAMS", len(skeleton.params)),
                    outputs=kernel.get("NUM_OUTPUTS", skeleton.outputs),
                    compute_slots=kernel.get("COMPUTE_SLOTS", 0),
                    stat_slots=kernel.get("STAT_SLOTS", 0),
                    buffer_num=kernel.get("BUFFER_NUM", BUFFER_NUM))
                found = check_row_tiling(config, plan_rows(config))
                problems += [f"{dtype}, {rows} rows x {length} on {cores} cores: {item}"
                             for item in found if item not in " ".join(problems)]
    return problems[:_MAX_TILING_PROBLEMS]


def row_shapes(spec: OpSpec) -> list[tuple[int, int]]:
    """(rows, row length) of every spec case's first tensor input."""
    shapes: list[tuple[int, int]] = []
    for case in spec.cases():
        tensors = [item for item in case.to_json()["inputs"] if item["kind"] == "tensor"]
        if tensors:
            dims = [int(dim) for dim in tensors[0]["shape"]] or [1]
            count = 1
            for dim in dims:
                count *= dim
            shapes.append((count // dims[-1] if dims[-1] else 0, dims[-1]))
    return list(dict.fromkeys(shapes))


def static_check(skeleton: Skeleton, sizes: Sequence[int],
                 shapes: Sequence[tuple[int, int]] = ()) -> StaticVerdict:
    """Lint, then the tiling simulation of the package's pattern: flat `sizes` for an
    elementwise package, (rows, row length) `shapes` for a row package."""
    findings = lint_package(skeleton.files, generation=skeleton.generation)
    errors = [item.render() for item in findings if item.severity == "error"]
    warnings = [item.render() for item in findings if item.severity != "error"]
    if skeleton.pattern == "rows":
        errors += row_tiling_problems(skeleton, shapes)
    else:
        errors += tiling_problems(skeleton, sizes)
    return StaticVerdict(errors=tuple(errors), warnings=tuple(warnings))
