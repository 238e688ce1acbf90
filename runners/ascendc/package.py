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

Two kernel patterns (runners/ascendc/contract.py): "elementwise" (the flat split above)
and "rows" (a reduction over the last dimension, then a pass over the row; module
parameters after the inputs): runners/ascendc/rows.py renders its kernel, tiling and
binding; the twin, tests and benchmark here take its row length and parameters.

`build_plan` says how to build, test and profile a package as argv lists; build.sh is
rendered from the same plans, so the script and the runner cannot drift apart.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from runners.ascendc.contract import (
    ASC_LAUNCH_PROLOGUE,
    DEFAULT_NPU_ARCH,
    DEFAULT_SOC,
    GENERATIONS,
    KERNEL_DTYPES,
    LEGACY_LAUNCH_PROLOGUE,
    MAX_PARAM_ELEMENTS,
    OUTPUT_LAYOUTS,
    PATTERN_SCALARS,
    PATTERNS,
    TEMPLATES,
    DtypeInfo,
    Generation,
    KernelBody,
    Names,
    OutputLayout,
    PackageError,
    PackageRequest,
    ParamSpec,
    Pattern,
    compute_slots_of,
    declared_constant,
    dispatch_cases,
    gm_type,
    indent_lines,
    kernel_file_name,
    launch_pieces,
    make_names,
    queue_pieces,
    render_entries,
    render_template,
)
from runners.ascendc.detect import ASCENDC_CMAKE_DIRS
from runners.ascendc.rows import render_row_binding, render_row_kernel, render_row_tiling
from runners.base import DEFAULT_TOLERANCES

# The contract's names, re-exported: generators and runners import them from here.
__all__ = [
    "ASC_LAUNCH_PROLOGUE", "DEFAULT_NPU_ARCH", "DEFAULT_SOC", "GENERATIONS", "KERNEL_DTYPES",
    "LEGACY_LAUNCH_PROLOGUE", "MAX_PARAM_ELEMENTS", "OUTPUT_LAYOUTS", "PATTERNS",
    "PATTERN_SCALARS", "TEMPLATES", "DtypeInfo", "Generation", "KernelBody", "Names",
    "OutputLayout", "PackageError", "PackageRequest", "ParamSpec", "Pattern",
    "compute_slots_of", "declared_constant", "dispatch_cases", "gm_type", "indent_lines",
    "kernel_file_name", "launch_pieces", "make_names", "render_entries", "render_template",
]

Mode = Literal["npu", "cpu", "profile"]
MODES: tuple[str, ...] = get_args(Mode)

PROFILE_WARM_UP = 20
TAIL_SIZES = (1, 31, 33, 1000003)  # odd sizes: no 32-byte multiple, and not per-core even
# Rows pattern: rows of odd lengths, one row, and more rows than any SoC has vector cores.
ROW_TAIL_SHAPES = ((1, 1), (3, 31), (97, 33), (5, 1001))
MANIFEST = "opbot.json"


def _check_request(request: PackageRequest) -> None:
    if request.generation not in GENERATIONS:
        raise PackageError(f"generation {request.generation!r} is not one of {GENERATIONS}")
    unknown = [dtype for dtype in request.dtypes if dtype not in KERNEL_DTYPES]
    if unknown or not request.dtypes:
        raise PackageError(f"kernels exist for {sorted(KERNEL_DTYPES)}, not {unknown or '[]'}")
    if request.body.compute_slots < 0 or request.body.stat_slots < 0:
        raise PackageError("compute_slots and stat_slots must be >= 0")
    if request.pattern not in PATTERNS:
        raise PackageError(f"pattern {request.pattern!r} is not one of {PATTERNS}")
    if request.pattern == "elementwise" and (request.params or set(request.layouts())
                                             != {"input"}):
        raise PackageError("an elementwise package takes no parameters and writes outputs "
                           "shaped like its inputs; use the rows pattern")
    layouts = request.layouts()
    if len(layouts) != request.outputs or not set(layouts) <= set(OUTPUT_LAYOUTS):
        raise PackageError(f"output_layouts {list(layouts)}: one of {OUTPUT_LAYOUTS} per "
                           "output")


# --------------------------------------------------------------------------- kernel


def _kernel_queues(names: Names) -> dict[str, str]:
    """The per-queue pieces of the kernel class: one TQue per input and per output."""
    return queue_pieces(names, global_length="length_", buffer="tileLength",
                        offset="tile * tileLength_")


def _kernel_views(names: Names, slots: int) -> str:
    widen = [f"const AscendC::LocalTensor<float> x{i} = Widen(in{i}, COMPUTE_SLOTS + {i}, count);"
             for i in range(len(names.inputs))]
    target = [f"const AscendC::LocalTensor<float> y{k} = "
              f"Target(out{k}, COMPUTE_SLOTS + NUM_INPUTS + {k});"
              for k in range(len(names.outputs))]
    scratch = [f"const AscendC::LocalTensor<float> s{j} = Slot({j});" for j in range(slots)]
    return indent_lines(widen + target + scratch)


def render_kernel(request: PackageRequest, names: Names) -> str:
    if request.pattern == "rows":
        return render_row_kernel(request, names)
    title = ("legacy toolchain (ascendc_library; CANN 8.x, still built by 9.x)"
             if request.generation == "legacy"
             else "ASC toolchain (CANN 9.x, find_package(ASC))")
    gm = gm_type(request.generation)
    return render_template("kernel.cpp.in", {
        "op": names.op, "summary": request.body.summary, "generation_title": title,
        "namespace": names.namespace, "class_name": names.class_name,
        "num_inputs": len(names.inputs), "num_outputs": len(names.outputs),
        "compute_slots": request.body.compute_slots,
        "init_params": ", ".join(f"{gm} {name}" for name in (*names.inputs, *names.outputs)),
        "views": _kernel_views(names, request.body.compute_slots),
        "compute": indent_lines(request.body.compute),
        "entries": render_entries(request, names),
        **_kernel_queues(names),
    })


# --------------------------------------------------------------------------- host side


def render_tiling(request: PackageRequest, names: Names, compute_slots: int) -> str:
    if request.pattern == "rows":
        return render_row_tiling(request, names, compute_slots)
    return render_template("tiling.h.in", {
        "op": names.op, "guard": f"OPBOT_{names.op.upper()}_TILING_H",
        "num_inputs": len(names.inputs), "num_outputs": len(names.outputs),
        "compute_slots": compute_slots,
    })


def render_binding(request: PackageRequest, names: Names) -> str:
    if request.pattern == "rows":
        return render_row_binding(request, names)
    contiguous = [f"{name}_c" for name in names.inputs]
    outputs = list(names.outputs)
    many = len(outputs) > 1
    schema_outputs = f"({', '.join(['Tensor'] * len(outputs))})" if many else "Tensor"
    return render_template("op.cpp.in", {
        **launch_pieces(request, names),
        "op": names.op, "namespace": names.namespace,
        "arg_list": ", ".join(names.inputs),
        "launch_params": ", ".join(f"uint8_t* {name}" for name in (*names.inputs, *outputs)),
        "return_type": (f"std::tuple<{', '.join(['at::Tensor'] * len(outputs))}>" if many
                        else "at::Tensor"),
        "tensor_params": ", ".join(f"const at::Tensor& {name}" for name in names.inputs),
        "contiguous": indent_lines([f"const at::Tensor {c} = {name}.contiguous();"
                              for c, name in zip(contiguous, names.inputs, strict=True)], indent=4),
        "checked": ", ".join(f'{{"{name}", {c}}}'
                             for name, c in zip(names.inputs, contiguous, strict=True)),
        "allocate": indent_lines([f"at::Tensor {name} = at::empty_like({contiguous[0]});"
                            for name in outputs], indent=4),
        "first": contiguous[0],
        "result": f"std::make_tuple({', '.join(outputs)})" if many else outputs[0],
        "pointers": ", ".join(f"static_cast<uint8_t*>({name}.data_ptr())"
                              for name in (*contiguous, *outputs)),
        "schema": (f"{names.op}({', '.join(f'Tensor {name}' for name in names.inputs)}) "
                   f"-> {schema_outputs}"),
    })


@dataclass(frozen=True)
class _TwinFiles:
    """The twin's tensor files in argv order, each with the C++ expression of its size."""

    ins: list[str]
    outs: list[str]
    sizes: dict[str, str]  # buffer name -> its size in bytes
    usage: str
    pattern: str

    @property
    def buffers(self) -> list[str]:
        return self.ins + self.outs


def _twin_files(names: Names, pattern: str = "elementwise",
                layouts: Sequence[str] = ()) -> _TwinFiles:
    """Inputs (then parameters, read like inputs) and outputs of the twin, in argv order."""
    ins = [f"in{i}" for i in range(len(names.inputs))]
    params = [f"param{j}" for j in range(len(names.params))]
    outs = [f"out{k}" for k in range(len(names.outputs))]
    layouts = list(layouts) or ["input"] * len(outs)
    sizes = {name: "bytes" for name in ins}
    sizes.update({name: "paramBytes" for name in params})
    sizes.update({name: "rowBytes" if layout == "rows" else "bytes"
                  for name, layout in zip(outs, layouts, strict=True)})
    usage = " ".join(f"<{name}.bin>" for name in names.tensors)
    return _TwinFiles(ins + params, outs, sizes, usage, pattern)


def _twin_scalars(pattern: str) -> dict[str, str]:
    """The argv, tiling and scalar-struct pieces that differ between the patterns."""
    fields = PATTERN_SCALARS[pattern]
    common = {"twin_fields": indent_lines([f"uint32_t {name};" for name in fields], 4),
              "twin_packed": ", ".join(f"tiling.{name}" for name in fields)}
    if pattern == "rows":
        # The row length comes after the fixed arguments of the elementwise twin.
        return {**common, "shape_usage": "<elements>", "fixed_args": "6",
                "parse_extra": "\n    const uint64_t rowLength = std::strtoull(argv[5], "
                               "nullptr, 10);",
                "tiling_call": "ComputeTiling(rowLength == 0 ? 0 : total / rowLength, "
                               "rowLength, elementBytes, cores, ubBytes)",
                "extra_sizes": "\n    // Parameters are float32 rows; per-row outputs hold "
                               "one value per row.\n    const size_t paramBytes = rowLength * "
                               "sizeof(float);\n    const size_t rowBytes = (rowLength == 0 ? "
                               "0 : total / rowLength) * elementBytes;",
                "size_params": "size_t bytes, size_t paramBytes, size_t rowBytes",
                "size_args": "bytes, paramBytes, rowBytes"}
    return {**common, "shape_usage": "<elements>", "fixed_args": "5", "parse_extra": "",
            "tiling_call": "ComputeTiling(total, elementBytes, cores, ubBytes)",
            "extra_sizes": "", "size_params": "size_t bytes", "size_args": "bytes"}


def _twin_legacy(files: _TwinFiles, names: Names, dtypes: Sequence[str]) -> dict[str, str]:
    ins, outs = files.ins, files.outs
    alloc: list[str] = []
    for index, name in enumerate(ins + outs):
        alloc.append(f"uint8_t* {name} = static_cast<uint8_t*>(AscendC::GmAlloc("
                     f"{files.sizes[name]}));")
        if index < len(ins):
            alloc += [f"if (!ReadFile(argv[FIXED_ARGS + {index}], {name}, "
                      f"{files.sizes[name]})) {{",
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
        write += [f"if (!WriteFile(argv[{slot}], {name}, {files.sizes[name]})) {{",
                  f'    std::fprintf(stderr, "cannot write %s\\n", argv[{slot}]);',
                  "    return 1;", "}"]
    gm = gm_type("legacy")
    fields = PATTERN_SCALARS[files.pattern]
    scalars = ", ".join(f"uint32_t {name}" for name in fields)
    prototypes = [f'extern "C" __global__ __aicore__ void {names.entry(dtype)}('
                  f"{', '.join(f'{gm} {name}' for name in ins + outs)}, {scalars});"
                  for dtype in dtypes]
    pointers = ", ".join(f"{gm} {name}" for name in ins + outs)
    unpacked = ", ".join(f"tiling->{name}" for name in fields)
    adapters: list[str] = []
    for dtype in dtypes:
        adapters += [f'extern "C" __global__ __aicore__ void {names.entry(dtype)}_twin('
                     f"{pointers}, {gm} scalars)", "{",
                     "    const TwinScalars* tiling = reinterpret_cast<const TwinScalars*>"
                     "(scalars);",
                     f"    {names.entry(dtype)}({', '.join(ins + outs)}, {unpacked});", "}", ""]
    return {"prototypes": "\n".join(prototypes), "adapters": "\n".join(adapters).rstrip(),
            "alloc_files": indent_lines(alloc, 4),
            "run_kernels": indent_lines(run, 4), "write_outputs": indent_lines(write, 4),
            "free_buffers": indent_lines([f"AscendC::GmFree({name});" for name in ins + outs], 4)}


def _twin_asc(files: _TwinFiles, names: Names, dtypes: Sequence[str]) -> dict[str, str]:
    ins, outs = files.ins, files.outs
    alloc: list[str] = []
    for index, name in enumerate(ins + outs):
        size = files.sizes[name]
        alloc.append(f"std::vector<uint8_t> {name}Host({size});")
        if index < len(ins):
            alloc += [f"if (!ReadFile(argv[FIXED_ARGS + {index}], {name}Host)) {{",
                      f'    std::fprintf(stderr, "cannot read %s\\n", argv[FIXED_ARGS + {index}]);',
                      "    return 1;", "}"]
        alloc += [f"uint8_t* {name} = nullptr;",
                  f"aclrtMalloc(reinterpret_cast<void**>(&{name}), {size}, "
                  "ACL_MEM_MALLOC_HUGE_FIRST);"]
        if index < len(ins):
            alloc.append(f"aclrtMemcpy({name}, {size}, {name}Host.data(), {size}, "
                         "ACL_MEMCPY_HOST_TO_DEVICE);")
    scalars = ", ".join(f"tiling.{name}" for name in PATTERN_SCALARS[files.pattern])
    run: list[str] = []
    for dtype in dtypes:
        run += [f'if (std::strcmp(dtype, "{dtype}") == 0) {{',
                f"    {names.entry(dtype)}<<<tiling.blockDim, 0, stream>>>("
                f"{', '.join(ins + outs)}, {scalars});", "}"]
    write: list[str] = []
    for k, name in enumerate(outs):
        slot = f"FIXED_ARGS + {len(ins) + k}"
        size = files.sizes[name]
        write += [f"aclrtMemcpy({name}Host.data(), {size}, {name}, {size}, "
                  "ACL_MEMCPY_DEVICE_TO_HOST);",
                  f"if (!WriteFile(argv[{slot}], {name}Host)) {{",
                  f'    std::fprintf(stderr, "cannot write %s\\n", argv[{slot}]);',
                  "    return 1;", "}"]
    # The OPBOT_CPU_MODEL driver is the legacy twin's (GmAlloc, adapters, ICPU_RUN_KF) with
    # the ASC kernels' `__gm__ uint8_t*` parameters and pointer-based file helpers.
    model = _twin_legacy(files, names, dtypes)

    def gm_files(text: str) -> str:
        return text.replace("ReadFile(", "ReadGm(").replace("WriteFile(", "WriteGm(")

    return {"alloc_files": indent_lines(alloc, 4), "run_kernels": indent_lines(run, 4),
            "write_outputs": indent_lines(write, 4),
            "free_buffers": indent_lines([f"aclrtFree({name});" for name in ins + outs], 4),
            "model_adapters": model["adapters"].replace("GM_ADDR", gm_type("asc")),
            "model_alloc": gm_files(model["alloc_files"]), "model_run": model["run_kernels"],
            "model_write": gm_files(model["write_outputs"]),
            "model_free": model["free_buffers"]}


def render_cpu_twin(request: PackageRequest, names: Names) -> str:
    return render_twin(request.generation, request.dtypes, names, pattern=request.pattern,
                       layouts=request.layouts())


def render_twin(generation: Generation, dtypes: Sequence[str], names: Names, *,
                pattern: str = "elementwise", layouts: Sequence[str] = ()) -> str:
    """The CPU twin's source; the CPU model renders its own from the manifest's facts, so a
    package's twin (a file anyone can edit) never decides what runs there."""
    files = _twin_files(names, pattern, layouts)
    sizes = indent_lines([line for dtype in dtypes for line in (
        f'if (std::strcmp(dtype, "{dtype}") == 0) {{',
        f"    return {KERNEL_DTYPES[dtype].size};", "}")], 4)
    usage = f"<rowLength> {files.usage}" if pattern == "rows" else files.usage
    common = {"op": names.op, "dtype_choices": "|".join(dtypes), "file_args": usage,
              "num_files": len(names.tensors), "dtype_sizes": sizes,
              **_twin_scalars(pattern)}
    if generation == "legacy":
        return render_template("cpu_twin.legacy.cpp.in",
                               {**common, **_twin_legacy(files, names, dtypes)})
    return render_template("cpu_twin.asc.in", {**common, **_twin_asc(files, names, dtypes)})


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
    sizes: Sequence[Any] = ROW_TAIL_SHAPES if request.pattern == "rows" else TAIL_SIZES
    for dtype in request.dtypes:
        for size in sizes:
            inputs: list[dict[str, Any]] = []
            if template is None:
                inputs = [{"kind": "tensor", "shape": _shape(size), "dtype": dtype,
                           "init": "randn", "low": None, "high": None, "value": None}
                          for _ in request.inputs]
            else:
                for item in template:
                    inputs.append({**item, "shape": _shape(size), "dtype": dtype}
                                  if item["kind"] == "tensor" else dict(item))
            label = "x".join(str(dim) for dim in _shape(size))
            cases.append({"name": f"tail{label}-{dtype}", "seed": seed, "inputs": inputs})
            seed += 1
    return cases


def _shape(size: int | tuple[int, ...]) -> list[int]:
    return list(size) if isinstance(size, tuple) else [size]


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
    template = "test_npu_rows.py.in" if request.pattern == "rows" else "test_npu.py.in"
    return render_template(template, {
        "op": names.op, "namespace": names.namespace, "library": names.library,
        "cpu_twin": names.cpu_twin, "cases": _pretty(npu_cases(request)),
        "init_args": _pretty(init_args), "tolerances": _pretty(_tolerances(request)),
        "params": repr([param.name for param in request.params]), "pattern": request.pattern,
    })


def _profiler(generation: str) -> str:
    return "msprof op" if generation == "legacy" else "msopprof"


def render_bench(request: PackageRequest, names: Names) -> str:
    init_args = None if request.init_args is None else json.loads(
        json.dumps(list(request.init_args), default=list))
    template = "bench_rows.py.in" if request.pattern == "rows" else "bench.py.in"
    return render_template(template, {
        "op": names.op, "namespace": names.namespace, "library": names.library,
        "perf_case": _pretty(_perf_case(request)), "init_args": _pretty(init_args),
        "profiler": _profiler(request.generation),
        "params": repr([param.name for param in request.params]),
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
        return indent_lines(lines)

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
    pattern: Pattern = "elementwise"
    params: tuple[ParamSpec, ...] = ()  # after the inputs, in this order (rows pattern)
    output_layouts: tuple[OutputLayout, ...] = ()  # per output; empty: all "input"

    def layouts(self) -> tuple[OutputLayout, ...]:
        default: OutputLayout = "input"
        return self.output_layouts or tuple(default for _ in range(self.outputs))

    def names(self) -> Names:
        """The package's identifiers (what its kernel entries and binding are called)."""
        return make_names(self.op, self.inputs, self.outputs,
                          [param.name for param in self.params])

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "op": self.op, "generation": self.generation, "namespace": self.namespace,
            "entries": self.entries, "inputs": list(self.inputs), "outputs": self.outputs,
            "compute_slots": self.compute_slots, "kernel": self.kernel, "soc": self.soc,
            "npu_arch": self.npu_arch}
        if self.pattern != "elementwise":  # absent means elementwise (older manifests)
            data.update({"pattern": self.pattern,
                         "params": [param.to_json() for param in self.params],
                         "output_layouts": list(self.layouts())})
        return {**data, "writer": "opbot"}

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
        except (TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
            raise PackageError(f"{MANIFEST}: a field has the wrong type ({exc}); entries is "
                               "an object of dtype -> kernel name, inputs a list of names, "
                               "outputs and compute_slots integers") from None

    @classmethod
    def _from_mapping(cls, data: Mapping[str, Any]) -> Manifest:
        generation = str(data["generation"])
        if generation not in GENERATIONS:
            raise PackageError(f"{MANIFEST}: unknown generation {generation!r}")
        pattern = str(data.get("pattern", "elementwise"))
        if pattern not in PATTERNS:
            raise PackageError(f"{MANIFEST}: unknown pattern {pattern!r} (one of {PATTERNS})")
        params = tuple(ParamSpec.from_json(item) for item in data.get("params") or [])
        layouts = tuple(str(item) for item in data.get("output_layouts") or [])
        outputs = int(data["outputs"])
        if layouts and (len(layouts) != outputs or not set(layouts) <= set(OUTPUT_LAYOUTS)):
            raise PackageError(f"{MANIFEST}: output_layouts must name one of "
                               f"{OUTPUT_LAYOUTS} per output")
        if pattern == "elementwise" and (params or set(layouts) - {"input"}):
            raise PackageError(f"{MANIFEST}: an elementwise package has no params and only "
                               "\"input\" output layouts")
        return cls(op=str(data["op"]), generation="legacy" if generation == "legacy" else "asc",
                   namespace=str(data["namespace"]),
                   entries={str(k): str(v) for k, v in dict(data["entries"]).items()},
                   inputs=tuple(str(item) for item in data["inputs"]),
                   outputs=outputs, compute_slots=int(data["compute_slots"]),
                   kernel=str(data["kernel"]), soc=str(data.get("soc", DEFAULT_SOC)),
                   npu_arch=str(data.get("npu_arch", DEFAULT_NPU_ARCH)),
                   pattern="rows" if pattern == "rows" else "elementwise", params=params,
                   output_layouts=tuple("rows" if item == "rows" else "input"
                                        for item in layouts))


def render_package(request: PackageRequest) -> dict[str, str]:
    """Every file of the package, keyed by its path relative to the op folder."""
    _check_request(request)
    names = make_names(request.op, request.inputs, request.outputs,
                       [param.name for param in request.params])
    kernel = request.kernel_source if request.kernel_source is not None else \
        render_kernel(request, names)
    slots = compute_slots_of(kernel)
    manifest = Manifest(op=names.op, generation=request.generation, namespace=names.namespace,
                        entries={dtype: names.entry(dtype) for dtype in request.dtypes},
                        inputs=names.inputs, outputs=len(names.outputs), compute_slots=slots,
                        kernel=kernel_file_name(names.op, request.generation),
                        soc=request.soc, npu_arch=request.npu_arch, pattern=request.pattern,
                        params=request.params, output_layouts=request.layouts())
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


MAX_MANIFEST_BYTES = 1 << 20


def _manifest_data(path: Path) -> Any:
    """The manifest's JSON, read only when it is a plain file of sane size (a sparse 10 GB
    file compresses to nothing in git) and decoded without deep nesting or huge numbers."""
    if path.is_symlink():
        raise PackageError(f"{path.name}: a link; the manifest must be a plain file")
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise PackageError(f"{path.name}: {path.stat().st_size} bytes; a manifest is at most "
                           f"{MAX_MANIFEST_BYTES} bytes")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise PackageError(f"{path.name}: not valid JSON: {str(exc)[:200]}") from None


def read_manifest(package: Path) -> Manifest:
    """The manifest of an op folder or of its ascendc/ folder."""
    for candidate in (package / "ascendc" / MANIFEST, package / MANIFEST):
        if candidate.is_file():
            return Manifest.from_json(_manifest_data(candidate))
    raise PackageError(f"{package}: no ascendc/{MANIFEST} (not an opbot Ascend C package)")
