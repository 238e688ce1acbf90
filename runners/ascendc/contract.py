"""The contract every Ascend C package of opbot follows, shared by its renderers
(runners/ascendc/package.py for the package, runners/ascendc/rows.py for the row pattern):
toolchain generations, kernel patterns and their scalar arguments, dtypes, the request a
generator hands over, the identifiers derived from it, the template engine, and the pieces
of the kernel entries and the binding's launch that every pattern shares.
"""

from __future__ import annotations

import keyword
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

Generation = Literal["legacy", "asc"]
GENERATIONS: tuple[str, ...] = get_args(Generation)
# What a kernel computes, and so how the host splits the work (see the module docstring of
# runners/ascendc/rows.py for "rows"): "elementwise" over flat, same-shaped tensors, or
# "rows": a reduction over the last dimension, then a pass over the row.
Pattern = Literal["elementwise", "rows"]
PATTERNS: tuple[str, ...] = get_args(Pattern)
# Where an output's shape comes from: the first input's ("input"), or one value per row of
# it ("rows": the first input's shape without its last dimension; rows pattern only).
OutputLayout = Literal["input", "rows"]
OUTPUT_LAYOUTS: tuple[str, ...] = get_args(OutputLayout)
# The scalar kernel arguments after the tensors, per pattern: the tiling's fields.
PATTERN_SCALARS: dict[str, tuple[str, ...]] = {
    "elementwise": ("totalLength", "blockLength", "tileLength"),
    "rows": ("rows", "rowLength", "rowsPerCore", "rowStride", "reduceLength"),
}
DEFAULT_SOC = "Ascend910B3"
DEFAULT_NPU_ARCH = "dav-2201"
TEMPLATES = Path(__file__).resolve().parent / "templates"

@dataclass(frozen=True)
class DtypeInfo:
    ctype: str  # the kernel's element type
    aten: str  # the ScalarType constant in the binding
    size: int


KERNEL_DTYPES: dict[str, DtypeInfo] = {
    "float32": DtypeInfo("float", "at::kFloat", 4),
    "float16": DtypeInfo("half", "at::kHalf", 2),
}

# Names the templates use for their own locals: arguments must not shadow them.
_RESERVED = frozenset({
    "tile", "count", "start", "totalLength", "blockLength", "tileLength", "op", "stream",
    "tiling", "numel", "core", "dtype", "m", "platform", "info", "tensor", "tensors", "first",
    "half", "float", "main", "argc", "argv", "bytes", "cores", "ubBytes", "total",
    "rows", "rowLength", "rowsPerCore", "rowStride", "reduceLength", "row", "paramBytes",
    "rowBytes", "sizes", "work", "width", "value", "stat", "loaded", "neutral", "lane",
    "next", "event", "length",
})
# A state_dict key: identifiers joined by dots (a submodule's parameter: "norm.weight"),
# none private, so the shim can hold it under the same key.
_PARAM_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}(?:\.[A-Za-z][A-Za-z0-9_]{0,63}){0,7}")
MAX_PARAM_ELEMENTS = 1 << 24
_CPP_KEYWORDS = frozenset({
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char",
    "class", "const", "constexpr", "continue", "default", "delete", "do", "double", "else",
    "enum", "explicit", "export", "extern", "false", "for", "friend", "goto", "if", "inline",
    "int", "long", "mutable", "namespace", "new", "noexcept", "not", "nullptr", "operator",
    "or", "private", "protected", "public", "register", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "template", "this", "throw", "true", "try",
    "typedef", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
    "while", "xor",
})
_COMPUTE_SLOTS = re.compile(r"\bCOMPUTE_SLOTS\s*=\s*(\d+)\s*;")


class PackageError(ValueError):
    """The request cannot become a package (bad name, dtype, or kernel source)."""


# --------------------------------------------------------------------------- templates


# `@{name}` only; `@@{` escapes. Bare `@` (decorators, `$@`) never matches.
_PLACEHOLDER = r"""
@(?:
  (?P<escaped>@(?=\{)) |
  \{(?P<braced>[a-z_][a-z0-9_]*)\} |
  (?P<named>(?!)) |
  (?P<invalid>(?!))
)
"""


class _Template(string.Template):
    """Placeholders are `@{name}` only: C++ braces, CMake `${VAR}`, shell `$@` stay literal."""

    delimiter = "@"
    pattern = _PLACEHOLDER  # type: ignore[assignment]  # Template compiles the string


@cache
def _template_text(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def render_template(name: str, values: Mapping[str, object]) -> str:
    """Fill one template; a placeholder without a value is a bug, so it raises KeyError."""
    return _Template(_template_text(name)).substitute({k: str(v) for k, v in values.items()})


# --------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class KernelBody:
    """The compute chain of one tile, as a generator writes it.

    `compute` holds C++ statements over float32 LocalTensors: inputs `x0..`, outputs `y0..`
    (write each one), scratch slots `s0..s{compute_slots-1}`, and the element count
    `count`. Everything else in the kernel is rendered around them.
    """

    compute: tuple[str, ...]
    compute_slots: int
    summary: str
    # Rows pattern only: per-row scalars ("stat blocks", one 32-byte block each: t0..).
    stat_slots: int = 0


@dataclass(frozen=True)
class ParamSpec:
    """A parameter or buffer of the reference module the operator takes after its inputs
    (an RMSNorm weight): its state_dict name and shape. Kernels read it as float32."""

    name: str
    shape: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ParamSpec:
        name = str(data["name"])
        shape = tuple(int(dim) for dim in data["shape"])
        if not _PARAM_NAME.fullmatch(name) or any(keyword.iskeyword(part)
                                                  for part in name.split(".")):
            raise PackageError(f"parameter name {name[:80]!r} must be a state_dict key: "
                               "identifiers joined by dots, none starting with _")
        elements = 1
        for dim in shape:
            elements *= dim
        if not shape or any(dim < 1 for dim in shape) or elements > MAX_PARAM_ELEMENTS:
            raise PackageError(f"parameter {name}: shape {list(shape)} is not a non-empty "
                               f"shape of at most {MAX_PARAM_ELEMENTS} elements")
        return cls(name, shape)


@dataclass(frozen=True)
class PackageRequest:
    op: str
    generation: Generation
    body: KernelBody
    inputs: tuple[str, ...]  # tensor arguments, in forward order
    outputs: int = 1
    dtypes: tuple[str, ...] = ("float32",)
    cases: tuple[Mapping[str, Any], ...] = ()  # CaseSpec.to_json() dicts for the NPU test
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    init_args: Sequence[Any] | None = None
    perf_case: Mapping[str, Any] | None = None
    derive_tail_cases: bool = True
    soc: str = DEFAULT_SOC
    npu_arch: str = DEFAULT_NPU_ARCH
    kernel_source: str | None = None  # a complete kernel written elsewhere (the agent)
    pattern: Pattern = "elementwise"
    params: tuple[ParamSpec, ...] = ()  # rows pattern: module parameters after the inputs
    output_layouts: tuple[OutputLayout, ...] = ()  # per output; empty: all "input"

    def layouts(self) -> tuple[OutputLayout, ...]:
        default: OutputLayout = "input"
        return self.output_layouts or tuple(default for _ in range(self.outputs))


@dataclass(frozen=True)
class Names:
    """Every identifier derived from the op name and its arguments."""

    op: str
    namespace: str  # torch.ops.<namespace>.<op> and the kernel's C++ namespace
    class_name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    params: tuple[str, ...] = ()  # parameter tensors, passed after the inputs

    @property
    def tensors(self) -> tuple[str, ...]:
        """Every tensor argument of a kernel entry, in order: inputs, params, outputs."""
        return (*self.inputs, *self.params, *self.outputs)

    @property
    def kernel_file(self) -> str:
        return f"{self.op}_kernel"

    @property
    def library(self) -> str:
        return f"build-npu/lib{self.op}_ops.so"

    @property
    def cpu_twin(self) -> str:
        return f"build-cpu/{self.op}_cpu_twin"

    def entry(self, dtype: str) -> str:
        return f"{self.op}_{dtype}"


def kernel_file_name(op: str, generation: str) -> str:
    return f"{op}_kernel.{'cpp' if generation == 'legacy' else 'asc'}"


def _identifier(name: str, index: int, taken: set[str]) -> str:
    clean = re.sub(r"\W", "_", name).strip("_") or f"x{index}"
    if clean[0].isdigit() or clean in _RESERVED or clean in _CPP_KEYWORDS \
            or keyword.iskeyword(clean):
        clean = f"{clean}_in"
    while clean in taken:
        clean = f"{clean}_{index}"
    taken.add(clean)
    return clean


def make_names(op: str, inputs: Sequence[str], outputs: int,
               params: Sequence[str] = ()) -> Names:
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", op):
        raise PackageError(f"op name {op!r} must match ^[a-z][a-z0-9_]*$ (at most 64 chars)")
    if not inputs or outputs < 1:
        raise PackageError("an elementwise package needs at least one input and one output")
    taken: set[str] = set()
    input_names = tuple(_identifier(name, index, taken) for index, name in enumerate(inputs))
    param_names = tuple(_identifier(name, index, taken) for index, name in enumerate(params))
    output_names = tuple(_identifier("out" if outputs == 1 else f"out{index}", index, taken)
                         for index in range(outputs))
    camel = "".join(part.capitalize() for part in op.split("_") if part)
    return Names(op=op, namespace=f"opbot_{op}", class_name=camel, inputs=input_names,
                 outputs=output_names, params=param_names)


def compute_slots_of(source: str) -> int:
    """The COMPUTE_SLOTS a hand- or model-written kernel declares (the host tiling needs it)."""
    found = _COMPUTE_SLOTS.search(source)
    if found is None:
        raise PackageError("the kernel source must declare `constexpr uint32_t COMPUTE_SLOTS "
                           "= <float32 scratch tiles per element>;` for the host tiling")
    return int(found.group(1))


def declared_constant(source: str, name: str) -> int:
    """`constexpr uint32_t <name> = <integer>;` from a kernel source (the host needs it)."""
    found = re.search(rf"\b{re.escape(name)}\s*=\s*(\d+)\s*;", source)
    if found is None:
        raise PackageError(f"the kernel source must declare `constexpr uint32_t {name} = "
                           "<integer>;` for the host tiling")
    return int(found.group(1))


def indent_lines(items: Iterable[str], indent: int = 8) -> str:
    pad = " " * indent
    return "\n".join(pad + item if item else "" for item in items)

def queue_pieces(names: Names, *, global_length: str, buffer: str, offset: str
                 ) -> dict[str, str]:
    """The per-queue pieces of a kernel class (one TQue per input and per output; float
    parameters in GM for the rows pattern): `buffer` sizes each queue's buffer in elements,
    `offset` is where one step's data starts in GM, `global_length` the core's share."""
    inputs = list(enumerate(names.inputs))
    outputs = list(enumerate(names.outputs))
    params = list(enumerate(names.params))
    return {
        "set_global_buffers": indent_lines(
            [f"inGm{i}_.SetGlobalBuffer((__gm__ T*){name} + start, {global_length});"
             for i, name in inputs]
            + [f"paramGm{j}_.SetGlobalBuffer((__gm__ float*){name}, rowLength);"
               for j, name in params]
            + [f"outGm{k}_.SetGlobalBuffer((__gm__ T*){name} + start, {global_length});"
               for k, name in outputs]),
        "init_queues": indent_lines(
            [f"pipe_.InitBuffer(inQueue{i}_, BUFFER_NUM, {buffer} * sizeof(T));"
             for i, _ in inputs]
            + [f"pipe_.InitBuffer(outQueue{k}_, BUFFER_NUM, {buffer} * sizeof(T));"
               for k, _ in outputs]),
        "copy_in": indent_lines(line for i, _ in inputs for line in (
            f"AscendC::LocalTensor<T> in{i} = inQueue{i}_.AllocTensor<T>();",
            f"AscendC::DataCopyPad(in{i}, inGm{i}_[{offset}], copyParams, padParams);",
            f"inQueue{i}_.EnQue(in{i});")),
        "dequeue": indent_lines(
            [f"AscendC::LocalTensor<T> in{i} = inQueue{i}_.DeQue<T>();" for i, _ in inputs]
            + [f"AscendC::LocalTensor<T> out{k} = outQueue{k}_.AllocTensor<T>();"
               for k, _ in outputs]),
        "finish": indent_lines(
            [f"Narrow(out{k}, y{k}, count);" for k, _ in outputs]
            + [f"outQueue{k}_.EnQue<T>(out{k});" for k, _ in outputs]
            + [f"inQueue{i}_.FreeTensor(in{i});" for i, _ in inputs]),
        "copy_out": indent_lines(line for k, _ in outputs for line in (
            f"AscendC::LocalTensor<T> out{k} = outQueue{k}_.DeQue<T>();",
            f"AscendC::DataCopyPad(outGm{k}_[{offset}], out{k}, copyParams);",
            f"outQueue{k}_.FreeTensor(out{k});")),
        "queue_members": indent_lines(
            [f"AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueue{i}_;"
             for i, _ in inputs]
            + [f"AscendC::TQue<AscendC::QuePosition::VECOUT, BUFFER_NUM> outQueue{k}_;"
               for k, _ in outputs], indent=4),
        "gm_members": indent_lines(
            [f"AscendC::GlobalTensor<T> inGm{i}_;" for i, _ in inputs]
            + [f"AscendC::GlobalTensor<float> paramGm{j}_;" for j, _ in params]
            + [f"AscendC::GlobalTensor<T> outGm{k}_;" for k, _ in outputs], indent=4),
    }


def gm_type(generation: str) -> str:
    # Legacy kernels take GM_ADDR (a macro for `__gm__ uint8_t*`); ASC spells it out.
    return "GM_ADDR" if generation == "legacy" else "__gm__ uint8_t*"


def render_entries(request: PackageRequest, names: Names) -> str:
    gm = gm_type(request.generation)
    arguments = list(names.tensors)
    scalars = PATTERN_SCALARS[request.pattern]
    qualifier = "__aicore__" if request.generation == "legacy" else "__vector__"
    rendered = [render_template("entry.cpp.in", {
        "kernel_qualifier": qualifier, "entry": names.entry(dtype),
        "params": ", ".join(f"{gm} {name}" for name in arguments),
        "namespace": names.namespace, "class_name": names.class_name,
        "ctype": KERNEL_DTYPES[dtype].ctype, "args": ", ".join(arguments),
        "scalar_params": ", ".join(f"uint32_t {name}" for name in scalars),
        "scalar_args": ", ".join(scalars),
    }) for dtype in request.dtypes]
    return "\n".join(rendered).rstrip("\n")


def _launch_args(names: Names, pattern: str = "elementwise") -> str:
    arguments = ", ".join(names.tensors)
    scalars = ", ".join(f"tiling.{name}" for name in PATTERN_SCALARS[pattern])
    # The continuation is indented for its place inside Launch's switch.
    return f"{arguments},\n{' ' * 16}{scalars}"


def dispatch_cases(request: PackageRequest, names: Names) -> str:
    """One case per dtype: the launch, then its error code checked (CheckLaunch)."""
    cases: list[str] = []
    for dtype in request.dtypes:
        entry = names.entry(dtype)
        if request.generation == "legacy":
            # The generated aclrtlaunch_<entry>() returns the launch's error code.
            launch = [f'CheckLaunch("{entry}", ACLRT_LAUNCH_KERNEL({entry})(tiling.blockDim, '
                      f"stream, {_launch_args(names, request.pattern)}));"]
        else:
            launch = [f"{entry}<<<tiling.blockDim, 0, stream>>>("
                      f"{_launch_args(names, request.pattern)});",
                      f'CheckLaunch("{entry}", aclrtGetLastError(ACL_RT_THREAD_LEVEL));']
        cases += [f"case {KERNEL_DTYPES[dtype].aten}:", *(f"    {line}" for line in launch),
                  "    break;"]
    return indent_lines(cases)


# <<<>>> returns nothing; the runtime keeps a failed launch's code as the thread's last error.
ASC_LAUNCH_PROLOGUE = (
    "// A <<<>>> launch returns nothing: a failed one leaves its code as this thread's last",
    "// runtime error. Reading (and so clearing) it first drops a code an earlier call left",
    "// behind, so the check after the launch blames the launch only.",
    "(void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);",
)
LEGACY_LAUNCH_PROLOGUE = (
    "// ACLRT_LAUNCH_KERNEL(k)(...) calls the generated aclrtlaunch_k(), which returns the",
    "// launch's error code (0: the kernel is on the stream).",
)


def launch_pieces(request: PackageRequest, names: Names) -> dict[str, str]:
    """The binding's generation-specific pieces: includes, a note, the launch prologue."""
    if request.generation == "legacy":
        includes = "\n".join(f'#include "aclrtlaunch_{names.entry(dtype)}.h"'
                             for dtype in request.dtypes)
        note = ("Legacy toolchain (ascendc.cmake, every CANN release): the kernels come from "
                "ascendc_library and are launched with ACLRT_LAUNCH_KERNEL.")
    else:
        includes = f'#include "{kernel_file_name(names.op, "asc")}"'
        note = ("ASC toolchain (CANN 9.x): compiled as ASC with the kernel source included; "
                "launches with <<<numBlocks, 0 (dynUBufSize), stream>>>.")
    prologue = LEGACY_LAUNCH_PROLOGUE if request.generation == "legacy" else \
        ASC_LAUNCH_PROLOGUE
    return {"launch_includes": includes, "launch_note": note,
            "launch_prologue": indent_lines(prologue, indent=4),
            "dispatch_cases": dispatch_cases(request, names),
            "dtype_list": ", ".join(request.dtypes)}
