"""The Ascend C operator package: the `ascendc/` folder a pull request adds, and its build.

A generator (the offline one, or the agent) supplies the compute chain of one tile as a
`KernelBody`; everything around it is fixed and rendered from the templates next to this
file: the kernel class (TPipe/TQue, double buffering, DataCopyPad), one `extern "C"` entry
per dtype, the host tiling, the torch.library binding, a CPU twin driver, one
CMakeLists.txt per CANN generation, the NPU tests, a benchmark and build.sh.

Two generations (see the toolchain notes): "legacy" (`.cpp` kernels, `__global__
__aicore__`, ascendc.cmake + ascendc_library, ACLRT_LAUNCH_KERNEL: the only one before 9.0,
and still shipped since) and "asc" (CANN 9.x: `.asc` kernels, `__global__ __vector__` with
`__gm__` pointers, find_package(ASC), `<<<numBlocks, 0, stream>>>`).

`build_plan` says how to build, test and profile a package as argv lists; build.sh is
rendered from the same plans, so the script and the runner cannot drift apart.
"""

from __future__ import annotations

import json
import keyword
import re
import shlex
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

from runners.ascendc.detect import ASCENDC_CMAKE_DIRS
from runners.base import DEFAULT_TOLERANCES

Generation = Literal["legacy", "asc"]
GENERATIONS: tuple[str, ...] = get_args(Generation)
Mode = Literal["npu", "cpu", "profile"]
MODES: tuple[str, ...] = get_args(Mode)

DEFAULT_SOC = "Ascend910B3"
DEFAULT_NPU_ARCH = "dav-2201"
PROFILE_WARM_UP = 20
TAIL_SIZES = (1, 31, 33, 1000003)  # odd sizes: no 32-byte multiple, and not per-core even
MANIFEST = "opbot.json"
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
})
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


@dataclass(frozen=True)
class Names:
    """Every identifier derived from the op name and its arguments."""

    op: str
    namespace: str  # torch.ops.<namespace>.<op> and the kernel's C++ namespace
    class_name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

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


def make_names(op: str, inputs: Sequence[str], outputs: int) -> Names:
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", op):
        raise PackageError(f"op name {op!r} must match ^[a-z][a-z0-9_]*$ (at most 64 chars)")
    if not inputs or outputs < 1:
        raise PackageError("an elementwise package needs at least one input and one output")
    taken: set[str] = set()
    input_names = tuple(_identifier(name, index, taken) for index, name in enumerate(inputs))
    output_names = tuple(_identifier("out" if outputs == 1 else f"out{index}", index, taken)
                         for index in range(outputs))
    camel = "".join(part.capitalize() for part in op.split("_") if part)
    return Names(op=op, namespace=f"opbot_{op}", class_name=camel, inputs=input_names,
                 outputs=output_names)


def _check_request(request: PackageRequest) -> None:
    if request.generation not in GENERATIONS:
        raise PackageError(f"generation {request.generation!r} is not one of {GENERATIONS}")
    unknown = [dtype for dtype in request.dtypes if dtype not in KERNEL_DTYPES]
    if unknown or not request.dtypes:
        raise PackageError(f"kernels exist for {sorted(KERNEL_DTYPES)}, not {unknown or '[]'}")
    if request.body.compute_slots < 0:
        raise PackageError("compute_slots must be >= 0")


def compute_slots_of(source: str) -> int:
    """The COMPUTE_SLOTS a hand- or model-written kernel declares (the host tiling needs it)."""
    found = _COMPUTE_SLOTS.search(source)
    if found is None:
        raise PackageError("the kernel source must declare `constexpr uint32_t COMPUTE_SLOTS "
                           "= <float32 scratch tiles per element>;` for the host tiling")
    return int(found.group(1))


# --------------------------------------------------------------------------- kernel


def _lines(items: Iterable[str], indent: int = 8) -> str:
    pad = " " * indent
    return "\n".join(pad + item if item else "" for item in items)


def _kernel_queues(names: Names) -> dict[str, str]:
    """The per-queue pieces of the kernel class: one TQue per input and per output."""
    inputs = list(enumerate(names.inputs))
    outputs = list(enumerate(names.outputs))
    return {
        "set_global_buffers": _lines(
            [f"inGm{i}_.SetGlobalBuffer((__gm__ T*){name} + start, length_);"
             for i, name in inputs]
            + [f"outGm{k}_.SetGlobalBuffer((__gm__ T*){name} + start, length_);"
               for k, name in outputs]),
        "init_queues": _lines(
            [f"pipe_.InitBuffer(inQueue{i}_, BUFFER_NUM, tileLength * sizeof(T));"
             for i, _ in inputs]
            + [f"pipe_.InitBuffer(outQueue{k}_, BUFFER_NUM, tileLength * sizeof(T));"
               for k, _ in outputs]),
        "copy_in": _lines(line for i, _ in inputs for line in (
            f"AscendC::LocalTensor<T> in{i} = inQueue{i}_.AllocTensor<T>();",
            f"AscendC::DataCopyPad(in{i}, inGm{i}_[tile * tileLength_], copyParams, padParams);",
            f"inQueue{i}_.EnQue(in{i});")),
        "dequeue": _lines(
            [f"AscendC::LocalTensor<T> in{i} = inQueue{i}_.DeQue<T>();" for i, _ in inputs]
            + [f"AscendC::LocalTensor<T> out{k} = outQueue{k}_.AllocTensor<T>();"
               for k, _ in outputs]),
        "finish": _lines(
            [f"Narrow(out{k}, y{k}, count);" for k, _ in outputs]
            + [f"outQueue{k}_.EnQue<T>(out{k});" for k, _ in outputs]
            + [f"inQueue{i}_.FreeTensor(in{i});" for i, _ in inputs]),
        "copy_out": _lines(line for k, _ in outputs for line in (
            f"AscendC::LocalTensor<T> out{k} = outQueue{k}_.DeQue<T>();",
            f"AscendC::DataCopyPad(outGm{k}_[tile * tileLength_], out{k}, copyParams);",
            f"outQueue{k}_.FreeTensor(out{k});")),
        "queue_members": _lines(
            [f"AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueue{i}_;"
             for i, _ in inputs]
            + [f"AscendC::TQue<AscendC::QuePosition::VECOUT, BUFFER_NUM> outQueue{k}_;"
               for k, _ in outputs], indent=4),
        "gm_members": _lines(
            [f"AscendC::GlobalTensor<T> inGm{i}_;" for i, _ in inputs]
            + [f"AscendC::GlobalTensor<T> outGm{k}_;" for k, _ in outputs], indent=4),
    }


def _kernel_views(names: Names, slots: int) -> str:
    widen = [f"const AscendC::LocalTensor<float> x{i} = Widen(in{i}, COMPUTE_SLOTS + {i}, count);"
             for i in range(len(names.inputs))]
    target = [f"const AscendC::LocalTensor<float> y{k} = "
              f"Target(out{k}, COMPUTE_SLOTS + NUM_INPUTS + {k});"
              for k in range(len(names.outputs))]
    scratch = [f"const AscendC::LocalTensor<float> s{j} = Slot({j});" for j in range(slots)]
    return _lines(widen + target + scratch)


def _gm_type(generation: str) -> str:
    # Legacy kernels take GM_ADDR (a macro for `__gm__ uint8_t*`); ASC spells it out.
    return "GM_ADDR" if generation == "legacy" else "__gm__ uint8_t*"


def _entries(request: PackageRequest, names: Names) -> str:
    gm = _gm_type(request.generation)
    arguments = [*names.inputs, *names.outputs]
    qualifier = "__aicore__" if request.generation == "legacy" else "__vector__"
    rendered = [render_template("entry.cpp.in", {
        "kernel_qualifier": qualifier, "entry": names.entry(dtype),
        "params": ", ".join(f"{gm} {name}" for name in arguments),
        "namespace": names.namespace, "class_name": names.class_name,
        "ctype": KERNEL_DTYPES[dtype].ctype, "args": ", ".join(arguments),
    }) for dtype in request.dtypes]
    return "\n".join(rendered).rstrip("\n")


def render_kernel(request: PackageRequest, names: Names) -> str:
    title = ("legacy toolchain (ascendc_library; CANN 8.x, still built by 9.x)"
             if request.generation == "legacy"
             else "ASC toolchain (CANN 9.x, find_package(ASC))")
    gm = _gm_type(request.generation)
    return render_template("kernel.cpp.in", {
        "op": names.op, "summary": request.body.summary, "generation_title": title,
        "namespace": names.namespace, "class_name": names.class_name,
        "num_inputs": len(names.inputs), "num_outputs": len(names.outputs),
        "compute_slots": request.body.compute_slots,
        "init_params": ", ".join(f"{gm} {name}" for name in (*names.inputs, *names.outputs)),
        "views": _kernel_views(names, request.body.compute_slots),
        "compute": _lines(request.body.compute),
        "entries": _entries(request, names),
        **_kernel_queues(names),
    })


# --------------------------------------------------------------------------- host side


def render_tiling(request: PackageRequest, names: Names, compute_slots: int) -> str:
    return render_template("tiling.h.in", {
        "op": names.op, "guard": f"OPBOT_{names.op.upper()}_TILING_H",
        "num_inputs": len(names.inputs), "num_outputs": len(names.outputs),
        "compute_slots": compute_slots,
    })


def _launch_args(names: Names) -> str:
    arguments = ", ".join([*names.inputs, *names.outputs])
    # The continuation is indented for its place inside Launch's switch.
    return f"{arguments},\n{' ' * 16}tiling.totalLength, tiling.blockLength, tiling.tileLength"


def _dispatch_cases(request: PackageRequest, names: Names) -> str:
    """One case per dtype: the launch, then its error code checked (CheckLaunch)."""
    cases: list[str] = []
    for dtype in request.dtypes:
        entry = names.entry(dtype)
        if request.generation == "legacy":
            # The generated aclrtlaunch_<entry>() returns the launch's error code.
            launch = [f'CheckLaunch("{entry}", ACLRT_LAUNCH_KERNEL({entry})(tiling.blockDim, '
                      f"stream, {_launch_args(names)}));"]
        else:
            launch = [f"{entry}<<<tiling.blockDim, 0, stream>>>({_launch_args(names)});",
                      f'CheckLaunch("{entry}", aclrtGetLastError(ACL_RT_THREAD_LEVEL));']
        cases += [f"case {KERNEL_DTYPES[dtype].aten}:", *(f"    {line}" for line in launch),
                  "    break;"]
    return _lines(cases)


# <<<>>> returns nothing; the runtime keeps a failed launch's code as the thread's last error.
_ASC_LAUNCH_PROLOGUE = (
    "// A <<<>>> launch returns nothing: a failed one leaves its code as this thread's last",
    "// runtime error. Reading (and so clearing) it first drops a code an earlier call left",
    "// behind, so the check after the launch blames the launch only.",
    "(void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);",
)
_LEGACY_LAUNCH_PROLOGUE = (
    "// ACLRT_LAUNCH_KERNEL(k)(...) calls the generated aclrtlaunch_k(), which returns the",
    "// launch's error code (0: the kernel is on the stream).",
)


def render_binding(request: PackageRequest, names: Names) -> str:
    contiguous = [f"{name}_c" for name in names.inputs]
    outputs = list(names.outputs)
    if request.generation == "legacy":
        includes = "\n".join(f'#include "aclrtlaunch_{names.entry(dtype)}.h"'
                             for dtype in request.dtypes)
        note = ("Legacy toolchain (ascendc.cmake, every CANN release): the kernels come from "
                "ascendc_library and are launched with ACLRT_LAUNCH_KERNEL.")
    else:
        includes = f'#include "{kernel_file_name(names.op, "asc")}"'
        note = ("ASC toolchain (CANN 9.x): compiled as ASC with the kernel source included; "
                "launches with <<<numBlocks, 0 (dynUBufSize), stream>>>.")
    many = len(outputs) > 1
    schema_outputs = f"({', '.join(['Tensor'] * len(outputs))})" if many else "Tensor"
    return render_template("op.cpp.in", {
        "op": names.op, "namespace": names.namespace, "launch_note": note,
        "arg_list": ", ".join(names.inputs), "launch_includes": includes,
        "launch_params": ", ".join(f"uint8_t* {name}" for name in (*names.inputs, *outputs)),
        "launch_prologue": _lines(_LEGACY_LAUNCH_PROLOGUE if request.generation == "legacy"
                                  else _ASC_LAUNCH_PROLOGUE, indent=4),
        "dispatch_cases": _dispatch_cases(request, names),
        "dtype_list": ", ".join(request.dtypes),
        "return_type": (f"std::tuple<{', '.join(['at::Tensor'] * len(outputs))}>" if many
                        else "at::Tensor"),
        "tensor_params": ", ".join(f"const at::Tensor& {name}" for name in names.inputs),
        "contiguous": _lines([f"const at::Tensor {c} = {name}.contiguous();"
                              for c, name in zip(contiguous, names.inputs, strict=True)], indent=4),
        "checked": ", ".join(f'{{"{name}", {c}}}'
                             for name, c in zip(names.inputs, contiguous, strict=True)),
        "allocate": _lines([f"at::Tensor {name} = at::empty_like({contiguous[0]});"
                            for name in outputs], indent=4),
        "first": contiguous[0],
        "result": f"std::make_tuple({', '.join(outputs)})" if many else outputs[0],
        "pointers": ", ".join(f"static_cast<uint8_t*>({name}.data_ptr())"
                              for name in (*contiguous, *outputs)),
        "schema": (f"{names.op}({', '.join(f'Tensor {name}' for name in names.inputs)}) "
                   f"-> {schema_outputs}"),
    })


def _twin_files(names: Names) -> tuple[list[str], list[str], str]:
    ins = [f"in{i}" for i in range(len(names.inputs))]
    outs = [f"out{k}" for k in range(len(names.outputs))]
    usage = " ".join([f"<{name}.bin>" for name in names.inputs]
                     + [f"<{name}.bin>" for name in names.outputs])
    return ins, outs, usage


def _twin_legacy(names: Names, dtypes: Sequence[str]) -> dict[str, str]:
    ins, outs, _ = _twin_files(names)
    alloc: list[str] = []
    for index, name in enumerate(ins + outs):
        alloc.append(f"uint8_t* {name} = static_cast<uint8_t*>(AscendC::GmAlloc(bytes));")
        if index < len(ins):
            alloc += [f"if (!ReadFile(argv[FIXED_ARGS + {index}], {name}, bytes)) {{",
                      f'    std::fprintf(stderr, "cannot read %s\\n", argv[FIXED_ARGS + {index}]);',
                      "    return 1;", "}"]
    run: list[str] = []
    for dtype in dtypes:
        run += [f'if (std::strcmp(dtype, "{dtype}") == 0) {{',
                f"    ICPU_RUN_KF({names.entry(dtype)}_twin, tiling.blockDim, "
                f"{', '.join(ins + outs)}, scalars);", "}"]
    write: list[str] = []
    for k, name in enumerate(outs):
        slot = f"FIXED_ARGS + {len(ins) + k}"
        write += [f"if (!WriteFile(argv[{slot}], {name}, bytes)) {{",
                  f'    std::fprintf(stderr, "cannot write %s\\n", argv[{slot}]);',
                  "    return 1;", "}"]
    gm = _gm_type("legacy")
    prototypes = [f'extern "C" __global__ __aicore__ void {names.entry(dtype)}('
                  f"{', '.join(f'{gm} {name}' for name in ins + outs)}, uint32_t totalLength, "
                  "uint32_t blockLength, uint32_t tileLength);" for dtype in dtypes]
    pointers = ", ".join(f"{gm} {name}" for name in ins + outs)
    adapters: list[str] = []
    for dtype in dtypes:
        adapters += [f'extern "C" __global__ __aicore__ void {names.entry(dtype)}_twin('
                     f"{pointers}, {gm} scalars)", "{",
                     "    const TwinScalars* tiling = reinterpret_cast<const TwinScalars*>"
                     "(scalars);",
                     f"    {names.entry(dtype)}({', '.join(ins + outs)}, tiling->totalLength, "
                     "tiling->blockLength, tiling->tileLength);", "}", ""]
    return {"prototypes": "\n".join(prototypes), "adapters": "\n".join(adapters).rstrip(),
            "alloc_files": _lines(alloc, 4),
            "run_kernels": _lines(run, 4), "write_outputs": _lines(write, 4),
            "free_buffers": _lines([f"AscendC::GmFree({name});" for name in ins + outs], 4)}


def _twin_asc(names: Names, dtypes: Sequence[str]) -> dict[str, str]:
    ins, outs, _ = _twin_files(names)
    alloc: list[str] = []
    for index, name in enumerate(ins + outs):
        alloc.append(f"std::vector<uint8_t> {name}Host(bytes);")
        if index < len(ins):
            alloc += [f"if (!ReadFile(argv[FIXED_ARGS + {index}], {name}Host)) {{",
                      f'    std::fprintf(stderr, "cannot read %s\\n", argv[FIXED_ARGS + {index}]);',
                      "    return 1;", "}"]
        alloc += [f"uint8_t* {name} = nullptr;",
                  f"aclrtMalloc(reinterpret_cast<void**>(&{name}), bytes, "
                  "ACL_MEM_MALLOC_HUGE_FIRST);"]
        if index < len(ins):
            alloc.append(f"aclrtMemcpy({name}, bytes, {name}Host.data(), bytes, "
                         "ACL_MEMCPY_HOST_TO_DEVICE);")
    run: list[str] = []
    for dtype in dtypes:
        run += [f'if (std::strcmp(dtype, "{dtype}") == 0) {{',
                f"    {names.entry(dtype)}<<<tiling.blockDim, 0, stream>>>("
                f"{', '.join(ins + outs)}, tiling.totalLength, tiling.blockLength, "
                "tiling.tileLength);", "}"]
    write: list[str] = []
    for k, name in enumerate(outs):
        slot = f"FIXED_ARGS + {len(ins) + k}"
        write += [f"aclrtMemcpy({name}Host.data(), bytes, {name}, bytes, "
                  "ACL_MEMCPY_DEVICE_TO_HOST);",
                  f"if (!WriteFile(argv[{slot}], {name}Host)) {{",
                  f'    std::fprintf(stderr, "cannot write %s\\n", argv[{slot}]);',
                  "    return 1;", "}"]
    # The OPBOT_CPU_MODEL driver is the legacy twin's (GmAlloc, adapters, ICPU_RUN_KF) with
    # the ASC kernels' `__gm__ uint8_t*` parameters and pointer-based file helpers.
    model = _twin_legacy(names, dtypes)

    def gm_files(text: str) -> str:
        return text.replace("ReadFile(", "ReadGm(").replace("WriteFile(", "WriteGm(")

    return {"alloc_files": _lines(alloc, 4), "run_kernels": _lines(run, 4),
            "write_outputs": _lines(write, 4),
            "free_buffers": _lines([f"aclrtFree({name});" for name in ins + outs], 4),
            "model_adapters": model["adapters"].replace("GM_ADDR", _gm_type("asc")),
            "model_alloc": gm_files(model["alloc_files"]), "model_run": model["run_kernels"],
            "model_write": gm_files(model["write_outputs"]),
            "model_free": model["free_buffers"]}


def render_cpu_twin(request: PackageRequest, names: Names) -> str:
    return render_twin(request.generation, request.dtypes, names)


def render_twin(generation: Generation, dtypes: Sequence[str], names: Names) -> str:
    """The CPU twin's source; the CPU model renders its own from the manifest's facts, so a
    package's twin (a file anyone can edit) never decides what runs there."""
    _, _, usage = _twin_files(names)
    sizes = _lines([line for dtype in dtypes for line in (
        f'if (std::strcmp(dtype, "{dtype}") == 0) {{',
        f"    return {KERNEL_DTYPES[dtype].size};", "}")], 4)
    common = {"op": names.op, "dtype_choices": "|".join(dtypes), "file_args": usage,
              "num_files": len(names.inputs) + len(names.outputs), "dtype_sizes": sizes}
    if generation == "legacy":
        return render_template("cpu_twin.legacy.cpp.in", {**common, **_twin_legacy(names, dtypes)})
    return render_template("cpu_twin.asc.in", {**common, **_twin_asc(names, dtypes)})


def render_cmake(request: PackageRequest, names: Names) -> str:
    template = ("CMakeLists.legacy.txt.in" if request.generation == "legacy"
                else "CMakeLists.asc.txt.in")
    dirs = [f"        ${{ASCEND_CANN_PACKAGE_PATH}}/{place.format(arch='${CANN_ARCH}')}"
            for place in ASCENDC_CMAKE_DIRS]
    return render_template(template, {"op": names.op, "soc": request.soc,
                                      "npu_arch": request.npu_arch,
                                      "ascendc_cmake_dirs": "\n".join(dirs)})


# --------------------------------------------------------------------------- tests, bench


def _pretty(value: Any) -> str:
    """A Python literal; a list of records gets one record per line."""
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return "[\n" + "".join(f"    {item!r},\n" for item in value) + "]"
    if isinstance(value, dict) and len(repr(value)) > 80:
        return "{\n" + "".join(f"    {key!r}: {item!r},\n" for key, item in value.items()) + "}"
    return repr(value)


def _tail_cases(request: PackageRequest) -> list[dict[str, Any]]:
    """Odd 1-D sizes per dtype: tails that are no 32-byte multiple, and uneven core splits.

    Every tensor input gets the same shape, which an elementwise op always accepts.
    """
    template = request.cases[0]["inputs"] if request.cases else None
    cases: list[dict[str, Any]] = []
    seed = len(request.cases)
    for dtype in request.dtypes:
        for size in TAIL_SIZES:
            inputs: list[dict[str, Any]] = []
            if template is None:
                inputs = [{"kind": "tensor", "shape": [size], "dtype": dtype, "init": "randn",
                           "low": None, "high": None, "value": None} for _ in request.inputs]
            else:
                for item in template:
                    inputs.append({**item, "shape": [size], "dtype": dtype}
                                  if item["kind"] == "tensor" else dict(item))
            cases.append({"name": f"tail{size}-{dtype}", "seed": seed, "inputs": inputs})
            seed += 1
    return cases


def npu_cases(request: PackageRequest) -> list[dict[str, Any]]:
    cases = [dict(case) for case in request.cases]
    if request.derive_tail_cases:
        cases += _tail_cases(request)
    return cases


def _perf_case(request: PackageRequest) -> dict[str, Any]:
    if request.perf_case is not None:
        return dict(request.perf_case)
    cases = npu_cases(request)
    return max(cases, key=_case_elements) if cases else {"name": "perf", "seed": 0,
                                                         "inputs": []}


def _case_elements(case: Mapping[str, Any]) -> int:
    total = 0
    for item in case["inputs"]:
        if item["kind"] == "tensor":
            size = 1
            for dim in item["shape"]:
                size *= int(dim)
            total += size
    return total


def _tolerances(request: PackageRequest) -> dict[str, dict[str, float]]:
    """The spec's tolerances over torch's defaults per dtype (as the harness uses them)."""
    table = {name: {"atol": tol.atol, "rtol": tol.rtol} for name, tol in
             DEFAULT_TOLERANCES.items()}
    table.update({name: {"atol": float(tol["atol"]), "rtol": float(tol["rtol"])}
                  for name, tol in request.tolerances.items()})
    return table


def render_test(request: PackageRequest, names: Names) -> str:
    init_args = None if request.init_args is None else json.loads(
        json.dumps(list(request.init_args), default=list))
    return render_template("test_npu.py.in", {
        "op": names.op, "namespace": names.namespace, "library": names.library,
        "cpu_twin": names.cpu_twin, "cases": _pretty(npu_cases(request)),
        "init_args": _pretty(init_args), "tolerances": _pretty(_tolerances(request)),
    })


def _profiler(generation: str) -> str:
    return "msprof op" if generation == "legacy" else "msopprof"


def render_bench(request: PackageRequest, names: Names) -> str:
    init_args = None if request.init_args is None else json.loads(
        json.dumps(list(request.init_args), default=list))
    return render_template("bench.py.in", {
        "op": names.op, "namespace": names.namespace, "library": names.library,
        "perf_case": _pretty(_perf_case(request)), "init_args": _pretty(init_args),
        "profiler": _profiler(request.generation),
    })


# --------------------------------------------------------------------------- build plans


@dataclass(frozen=True)
class BuildContext:
    """Values a build needs from the machine. The defaults are build.sh's shell variables;
    a runner passes concrete ones (`BuildContext.for_runner`)."""

    cann_home: str = "$ASCEND_HOME_PATH"
    soc: str = "$SOC_VERSION"
    npu_arch: str = "$NPU_ARCH"
    torch_cmake_prefix: str = "$TORCH_CMAKE_PREFIX"
    torch_npu_path: str = "$TORCH_NPU_PATH"
    cxx11_abi: str = "$CXX11_ABI"
    python: str = "$PYTHON"
    launch_count: str = "$LAUNCH_COUNT"

    @classmethod
    def for_runner(cls, *, cann_home: str, soc: str = DEFAULT_SOC,
                   npu_arch: str = DEFAULT_NPU_ARCH, python: str = "python3",
                   launch_count: int = 5) -> BuildContext:
        """Concrete values from this Python environment (torch imported, torch_npu only
        located: importing it fails where CANN is missing)."""
        import importlib.util

        import torch

        npu_spec = importlib.util.find_spec("torch_npu")
        npu_path = str(Path(npu_spec.origin).parent) if npu_spec and npu_spec.origin else ""
        abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
        return cls(cann_home=cann_home, soc=soc, npu_arch=npu_arch,
                   torch_cmake_prefix=str(torch.utils.cmake_prefix_path),
                   torch_npu_path=npu_path, cxx11_abi=str(abi), python=python,
                   launch_count=str(launch_count))


@dataclass(frozen=True)
class Step:
    """One command of a build: argv (no shell), run in the package folder."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 1800.0
    # The step runs the package's own code (its test, its benchmark), so a runner runs it
    # in opbot's sandbox: the package folder writable, `readable` readable, nothing else.
    runs_package_code: bool = False
    readable: tuple[str, ...] = ()

    def shell(self) -> str:
        """The command as build.sh spells it: $VARIABLES expand, everything else is quoted."""
        words = [f"{key}={_shell_word(value)}" for key, value in self.env.items()]
        return " ".join([*words, *(_shell_word(arg) for arg in self.argv)])


@dataclass(frozen=True)
class BuildPlan:
    op: str
    generation: Generation
    mode: Mode
    steps: tuple[Step, ...]
    library: str  # the torch extension, relative to the package folder (npu, profile)
    cpu_twin: str  # the CPU twin executable (cpu)
    report: str  # pytest's JUnit XML of the test step

    def step(self, name: str) -> Step:
        for item in self.steps:
            if item.name == name:
                return item
        raise KeyError(name)


_SHELL_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_SHELL_VARIABLE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")


def _shell_word(word: str) -> str:
    if "$" in word and _SHELL_SAFE.fullmatch(_SHELL_VARIABLE.sub("", word) or "x"):
        return f'"{word}"'
    return shlex.quote(word)


def _configure(generation: str, mode: Mode, build_dir: str, context: BuildContext) -> Step:
    argv = ["cmake", "-S", ".", "-B", build_dir]
    if generation == "legacy":
        argv += [f"-DRUN_MODE={'cpu' if mode == 'cpu' else 'npu'}",
                 f"-DSOC_VERSION={context.soc}",
                 f"-DASCEND_CANN_PACKAGE_PATH={context.cann_home}"]
    else:
        argv += [f"-DCMAKE_ASC_ARCHITECTURES={context.npu_arch}"]
        if mode == "cpu":
            argv.append("-DCMAKE_ASC_RUN_MODE=cpu")
    if mode == "cpu":
        argv.append("-DCMAKE_BUILD_TYPE=Debug")  # the twin is for gdb and printf
    else:
        argv += ["-DCMAKE_BUILD_TYPE=Release",
                 f"-DCMAKE_PREFIX_PATH={context.torch_cmake_prefix}",
                 f"-DTORCH_NPU_PATH={context.torch_npu_path}",
                 f"-DGLIBCXX_USE_CXX11_ABI={context.cxx11_abi}"]
    return Step("configure", tuple(argv), timeout_s=600.0)


def build_plan(op: str, generation: Generation, mode: Mode, *,
               entries: Sequence[str] = (), context: BuildContext | None = None) -> BuildPlan:
    """The commands that build (and test, or profile) a package, run in its folder.

    Each mode has its own build folder: the docs ask to drop CMakeCache.txt when switching
    between NPU and CPU modes, and separate folders never mix them.
    """
    if generation not in GENERATIONS or mode not in MODES:
        raise PackageError(f"no build plan for generation {generation!r}, mode {mode!r}")
    context = context or BuildContext()
    names = make_names(op, ["x"], 1)
    build_dir = "build-cpu" if mode == "cpu" else "build-npu"
    report = f"{build_dir}/pytest-{mode}.xml"
    steps = [
        Step("clean-cache", ("cmake", "-E", "rm", "-f", f"{build_dir}/CMakeCache.txt"),
             timeout_s=60.0),
        _configure(generation, mode, build_dir, context),
        Step("build", ("cmake", "--build", build_dir, "--parallel")),
    ]
    pytest = (context.python, "-m", "pytest", f"tests/test_{op}_npu.py", "-q",
              "-p", "no:cacheprovider", f"--junitxml={report}")
    if mode == "npu":
        steps.append(Step("test", (*pytest, "-m", "npu"),
                          env={"OPBOT_ASCENDC_LIB": names.library}, runs_package_code=True))
    elif mode == "cpu":
        steps.append(Step("test", (*pytest, "-k", "cpu_twin"),
                          env={"OPBOT_ASCENDC_CPU_TWIN": names.cpu_twin},
                          runs_package_code=True))
    else:
        profiler = ("msprof", "op") if generation == "legacy" else ("msopprof",)
        kernels = "|".join(entries) if entries else f"{op}_*"
        steps.append(Step("profile", (
            *profiler, "--output=prof", f"--kernel-name={kernels}",
            f"--warm-up={PROFILE_WARM_UP}", f"--launch-count={context.launch_count}",
            context.python, f"bench_{op}.py"), env={"OPBOT_ASCENDC_LIB": names.library},
            runs_package_code=True))
    return BuildPlan(op=op, generation=generation, mode=mode, steps=tuple(steps),
                     library=names.library, cpu_twin=names.cpu_twin, report=report)


def render_build_script(request: PackageRequest, names: Names) -> str:
    entries = [names.entry(dtype) for dtype in request.dtypes]

    def block(mode: Mode) -> str:
        plan = build_plan(names.op, request.generation, mode, entries=entries)
        lines: list[str] = []
        for step in plan.steps:
            lines += [f'echo "[build.sh] {mode}: {step.name}"', step.shell()]
        return _lines(lines)

    title = ("legacy toolchain: ascendc.cmake, any CANN release"
             if request.generation == "legacy" else "ASC toolchain, CANN 9.x")
    return render_template("build.sh.in", {
        "op": names.op, "generation_title": title, "soc": request.soc,
        "npu_arch": request.npu_arch, "profiler": _profiler(request.generation),
        "npu_steps": block("npu"), "cpu_steps": block("cpu"),
        "profile_steps": block("profile"),
    })


# --------------------------------------------------------------------------- the package


@dataclass(frozen=True)
class Manifest:
    """`ascendc/opbot.json`: what a runner needs to build and test the package."""

    op: str
    generation: Generation
    namespace: str
    entries: dict[str, str]  # dtype -> extern "C" kernel name
    inputs: tuple[str, ...]
    outputs: int
    compute_slots: int
    kernel: str
    soc: str
    npu_arch: str

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "generation": self.generation, "namespace": self.namespace,
                "entries": self.entries, "inputs": list(self.inputs), "outputs": self.outputs,
                "compute_slots": self.compute_slots, "kernel": self.kernel, "soc": self.soc,
                "npu_arch": self.npu_arch, "writer": "opbot"}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Manifest:
        """The manifest from its JSON; PackageError naming what is wrong, whatever it holds."""
        if not isinstance(data, Mapping):
            raise PackageError(f"{MANIFEST}: a JSON object is expected, not "
                               f"{type(data).__name__}")
        try:
            return cls._from_mapping(data)
        except KeyError as exc:
            raise PackageError(f"{MANIFEST}: the field {exc} is missing") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise PackageError(f"{MANIFEST}: a field has the wrong type ({exc}); entries is "
                               "an object of dtype -> kernel name, inputs a list of names, "
                               "outputs and compute_slots integers") from None

    @classmethod
    def _from_mapping(cls, data: Mapping[str, Any]) -> Manifest:
        generation = str(data["generation"])
        if generation not in GENERATIONS:
            raise PackageError(f"{MANIFEST}: unknown generation {generation!r}")
        return cls(op=str(data["op"]), generation="legacy" if generation == "legacy" else "asc",
                   namespace=str(data["namespace"]),
                   entries={str(k): str(v) for k, v in dict(data["entries"]).items()},
                   inputs=tuple(str(item) for item in data["inputs"]),
                   outputs=int(data["outputs"]), compute_slots=int(data["compute_slots"]),
                   kernel=str(data["kernel"]), soc=str(data.get("soc", DEFAULT_SOC)),
                   npu_arch=str(data.get("npu_arch", DEFAULT_NPU_ARCH)))


def render_package(request: PackageRequest) -> dict[str, str]:
    """Every file of the package, keyed by its path relative to the op folder."""
    _check_request(request)
    names = make_names(request.op, request.inputs, request.outputs)
    kernel = request.kernel_source if request.kernel_source is not None else \
        render_kernel(request, names)
    slots = compute_slots_of(kernel)
    manifest = Manifest(op=names.op, generation=request.generation, namespace=names.namespace,
                        entries={dtype: names.entry(dtype) for dtype in request.dtypes},
                        inputs=names.inputs, outputs=len(names.outputs), compute_slots=slots,
                        kernel=kernel_file_name(names.op, request.generation),
                        soc=request.soc, npu_arch=request.npu_arch)
    twin = "cpu_twin.cpp" if request.generation == "legacy" else "cpu_twin.asc"
    files = {
        f"ascendc/{manifest.kernel}": kernel,
        f"ascendc/{names.op}_tiling.h": render_tiling(request, names, slots),
        "ascendc/op.cpp": render_binding(request, names),
        f"ascendc/{twin}": render_cpu_twin(request, names),
        "ascendc/CMakeLists.txt": render_cmake(request, names),
        "ascendc/build.sh": render_build_script(request, names),
        f"ascendc/bench_{names.op}.py": render_bench(request, names),
        f"ascendc/tests/test_{names.op}_npu.py": render_test(request, names),
        "ascendc/tests/conftest.py": render_template("conftest.py.in", {"op": names.op}),
        f"ascendc/{MANIFEST}": json.dumps(manifest.to_json(), indent=2) + "\n",
    }
    return files


def write_package(files: Mapping[str, str], root: Path) -> list[Path]:
    """Write the files under the op folder `root`; build.sh is made executable."""
    written: list[Path] = []
    base = root.resolve()
    for relative, text in files.items():
        path = (root / relative).resolve()
        # The names come from generators and models: none may leave the op folder.
        if Path(relative).is_absolute() or not path.is_relative_to(base) or path == base:
            raise PackageError(f"{relative}: a package file must stay inside {root.name}/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if path.suffix == ".sh":
            path.chmod(0o755)
        written.append(path)
    return written


def read_manifest(package: Path) -> Manifest:
    """The manifest of an op folder or of its ascendc/ folder."""
    for candidate in (package / "ascendc" / MANIFEST, package / MANIFEST):
        if candidate.is_file():
            try:
                data = json.loads(candidate.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                raise PackageError(f"{candidate.name}: not valid JSON: {exc}") from None
            return Manifest.from_json(data)
    raise PackageError(f"{package}: no ascendc/{MANIFEST} (not an opbot Ascend C package)")
