"""Ascend C operator packages: golden files, and every check that can run without CANN.

- golden: add (two inputs), gelu and relu, in both toolchain generations, must match
  tests/data/ascendc_golden/<generation>/<op>/ (OPBOT_UPDATE_GOLDEN=1 rewrites them);
- the generated sources lint clean; CMakeLists.txt has each generation's required lines;
  build.sh passes `bash -n` (and shellcheck when installed); the Python files parse;
- g++ -fsyntax-only on the bindings (op.cpp) against stub headers declaring the Ascend C,
  ACL, torch_npu and torch surfaces (tests/data/ascendc_stubs);
- the CPU twins, compiled with g++ against a CPU model of the Ascend C kernel API, run the
  generated kernels block by block and must match the PyTorch reference on odd sizes;
- the generated host tiling (C++) must agree with the Python simulator;
- the offline generator says "unsupported" (naming the ops) outside the elementwise family.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from bot.agent.backends.ascendc.offline import (
    Generated,
    PackageOptions,
    Unsupported,
    generate,
    lower,
)
from bot.agent.offline.graph import Graph, lower_program
from bot.agent.offline.trace import export_reference
from runners.ascendc.lint import lint_cmake, lint_package
from runners.ascendc.package import (
    TAIL_SIZES as TAIL_SIZES_IN_PACKAGE,
)
from runners.ascendc.package import (
    BuildContext,
    KernelBody,
    PackageError,
    PackageRequest,
    build_plan,
    render_package,
    write_package,
)
from runners.ascendc.tiling import TilingConfig, plan_tiling, scratch_bytes
from runners.base import CaseSpec, InputCase
from tests.support import DATA, REFS

GOLDEN = DATA / "ascendc_golden"
STUBS = DATA / "ascendc_stubs"
UPDATE = os.environ.get("OPBOT_UPDATE_GOLDEN") == "1"
GENERATIONS = ("legacy", "asc")
GXX = shutil.which("g++")
needs_gxx = pytest.mark.skipif(GXX is None, reason="g++ is not installed")
TWIN_SIZES = (1, 31, 33, 4099, 1000003)


class _Add(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


class _Gelu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


class _Relu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


class _KitchenSink(torch.nn.Module):
    """Every lowering rule at least once; outputs that are inputs, repeats and constants."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = torch.sigmoid(x) * y - torch.tanh(y)
        b = F.gelu(x, approximate="tanh") / (y.abs() + 1.0)
        c = torch.rsqrt(x * x + 1.0) + torch.sqrt(y.abs()) - torch.exp(-x.abs())
        d = (torch.clamp(x, -0.5, 0.75) * 3.0 + torch.maximum(x, y) - torch.minimum(x, y)
             + torch.log(y.abs() + 0.5))
        e = (2.0 / (x.abs() + 1.0) + torch.reciprocal(y.abs() + 2.0) - 1.5 * x + torch.relu(y)
             - (1.0 - x))
        f = (x ** 2 + 0.1 * x ** 3 + 2.0 ** x + F.leaky_relu(x, 0.2) + torch.clamp_min(y, 0.1)
             + torch.clamp_max(y, 0.2) + x / 4.0 + torch.add(x, y, alpha=0.5)
             - torch.sub(x, y, alpha=2.0))
        return a, b, c, d, e, f, x, a, torch.zeros_like(x), torch.pow(x, 0)


@dataclass(frozen=True)
class _Example:
    model: torch.nn.Module
    inputs: int
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float16)


EXAMPLES: dict[str, _Example] = {
    "add": _Example(_Add(), 2),
    "gelu": _Example(_Gelu(), 1),
    "relu": _Example(_Relu(), 1),
}
SINK = _Example(_KitchenSink(), 2, (torch.float32,))


def _cases(example: _Example) -> tuple[dict[str, object], ...]:
    """The spec-style cases of the golden packages: one odd 2-D shape per dtype."""
    cases = []
    for index, dtype in enumerate(example.dtypes):
        name = str(dtype).removeprefix("torch.")
        inputs = [InputCase(kind="tensor", shape=[127, 4099], dtype=name)
                  for _ in range(example.inputs)]
        cases.append(CaseSpec(name=f"shape0-{name}", inputs=inputs, seed=index).to_json())
    return tuple(cases)


_TRACED: dict[_Example, list[Graph]] = {}


def _graphs(example: _Example) -> list[Graph]:
    """One traced graph per dtype; traced once per example (export is the slow part)."""
    if example not in _TRACED:  # keyed by the example itself: it stays alive in the cache
        _TRACED[example] = [lower_program(export_reference(example.model, [
            torch.randn(4, 8, dtype=dtype) for _ in range(example.inputs)]))
            for dtype in example.dtypes]
    return _TRACED[example]


def _generate(op: str, example: _Example, generation: str) -> Generated:
    options = PackageOptions(generation=generation,  # type: ignore[arg-type]
                             cases=_cases(example))
    result = generate(_graphs(example), op, options)
    assert isinstance(result, Generated), result
    return result


@pytest.fixture(scope="module")
def packages() -> dict[tuple[str, str], Generated]:
    return {(generation, op): _generate(op, example, generation)
            for op, example in EXAMPLES.items() for generation in GENERATIONS}


# --------------------------------------------------------------------------- golden files


def _golden_dir(generation: str, op: str) -> Path:
    return GOLDEN / generation / op


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_packages_match_the_golden_files(packages: dict[tuple[str, str], Generated],
                                         generation: str, op: str) -> None:
    files = packages[(generation, op)].files
    folder = _golden_dir(generation, op)
    if UPDATE:
        shutil.rmtree(folder, ignore_errors=True)
        write_package(files, folder)
    on_disk = {path.relative_to(folder).as_posix() for path in folder.rglob("*")
               if path.is_file()}
    assert on_disk == set(files), "golden files differ in name; OPBOT_UPDATE_GOLDEN=1 rewrites"
    for relative, text in files.items():
        golden = (folder / relative).read_text(encoding="utf-8")
        assert text == golden, f"{generation}/{op}/{relative} changed; review the diff, then " \
                               "rewrite with OPBOT_UPDATE_GOLDEN=1"


def test_the_generations_differ_where_the_toolchains_do(
        packages: dict[tuple[str, str], Generated]) -> None:
    legacy = packages[("legacy", "add")].files
    asc = packages[("asc", "add")].files
    assert "ascendc/add_kernel.cpp" in legacy
    assert "ascendc/add_kernel.asc" in asc
    assert 'extern "C" __global__ __aicore__ void add_float32(GM_ADDR x, GM_ADDR y, GM_ADDR out,' \
        in legacy["ascendc/add_kernel.cpp"]
    assert 'extern "C" __global__ __vector__ void add_float16(__gm__ uint8_t* x, ' \
        in asc["ascendc/add_kernel.asc"]
    assert "ACLRT_LAUNCH_KERNEL(add_float32)(tiling.blockDim, stream," in legacy["ascendc/op.cpp"]
    assert "add_float32<<<tiling.blockDim, 0, stream>>>" in asc["ascendc/op.cpp"]
    assert "msprof op --output=prof" in legacy["ascendc/build.sh"]
    assert "msopprof --output=prof" in asc["ascendc/build.sh"]
    for files in (legacy, asc):
        binding = files["ascendc/op.cpp"]
        assert "TORCH_LIBRARY(opbot_add, m)" in binding
        assert "TORCH_LIBRARY_IMPL(opbot_add, PrivateUse1, m)" in binding
        assert "GetCoreNumAiv()" in binding
        assert "CoreMemType::UB" in binding
        assert ".contiguous()" in binding
        assert ".data_ptr()" in binding


# --------------------------------------------------------------------------- text checks


@pytest.mark.parametrize("generation", GENERATIONS)
def test_generated_packages_lint_clean(packages: dict[tuple[str, str], Generated],
                                       generation: str) -> None:
    for op in EXAMPLES:
        findings = lint_package(packages[(generation, op)].files)
        assert findings == [], [item.render() for item in findings]


@pytest.mark.parametrize("generation", GENERATIONS)
def test_cmake_has_the_required_lines(packages: dict[tuple[str, str], Generated],
                                      generation: str) -> None:
    text = packages[(generation, "gelu")].files["ascendc/CMakeLists.txt"]
    assert lint_cmake(text, generation=generation) == []  # type: ignore[arg-type]
    other = "asc" if generation == "legacy" else "legacy"
    assert lint_cmake(text, generation=other)  # type: ignore[arg-type]
    cmake = shutil.which("cmake")
    if cmake is not None:  # the text must at least be CMake syntax; configuring needs CANN
        probe = subprocess.run([cmake, "--help-command", "find_package"], capture_output=True,
                               check=False)
        assert probe.returncode == 0


def test_build_scripts_are_valid_bash(packages: dict[tuple[str, str], Generated],
                                      tmp_path: Path) -> None:
    for generation in GENERATIONS:
        script = tmp_path / f"build-{generation}.sh"
        script.write_text(packages[(generation, "add")].files["ascendc/build.sh"])
        subprocess.run(["bash", "-n", str(script)], check=True)
        if shutil.which("shellcheck"):
            result = subprocess.run(["shellcheck", "-S", "warning", str(script)],
                                    capture_output=True, text=True, check=False)
            assert result.returncode == 0, result.stdout


def test_build_script_runs_the_build_plans(packages: dict[tuple[str, str], Generated]) -> None:
    for generation in GENERATIONS:
        script = packages[(generation, "gelu")].files["ascendc/build.sh"]
        for mode in ("npu", "cpu", "profile"):
            plan = build_plan("gelu", generation, mode,  # type: ignore[arg-type]
                              entries=["gelu_float32", "gelu_float16"])
            for step in plan.steps:
                assert step.shell() in script


def test_python_files_parse(packages: dict[tuple[str, str], Generated]) -> None:
    for package in packages.values():
        for path, text in package.files.items():
            if path.endswith(".py"):
                ast.parse(text, filename=path)


def test_build_plans_are_argv_lists_per_generation_and_mode() -> None:
    context = BuildContext(cann_home="/opt/cann", soc="Ascend910B2", npu_arch="dav-2201",
                           torch_cmake_prefix="/t", torch_npu_path="/n", cxx11_abi="1",
                           python="/usr/bin/python3", launch_count="7")
    legacy = build_plan("gelu", "legacy", "npu", context=context)
    assert [step.name for step in legacy.steps] == ["clean-cache", "configure", "build", "test"]
    assert legacy.step("configure").argv[:5] == ("cmake", "-S", ".", "-B", "build-npu")
    assert "-DASCEND_CANN_PACKAGE_PATH=/opt/cann" in legacy.step("configure").argv
    assert "-DSOC_VERSION=Ascend910B2" in legacy.step("configure").argv
    cpu = build_plan("gelu", "asc", "cpu", context=context)
    assert "-DCMAKE_ASC_RUN_MODE=cpu" in cpu.step("configure").argv
    assert "-DCMAKE_ASC_ARCHITECTURES=dav-2201" in cpu.step("configure").argv
    assert cpu.step("test").env == {"OPBOT_ASCENDC_CPU_TWIN": "build-cpu/gelu_cpu_twin"}
    profile = build_plan("gelu", "legacy", "profile", entries=["gelu_float32"], context=context)
    assert profile.step("profile").argv == (
        "msprof", "op", "--output=prof", "--kernel-name=gelu_float32", "--warm-up=20",
        "--launch-count=7", "/usr/bin/python3", "bench_gelu.py")
    assert build_plan("gelu", "asc", "profile", context=context).step("profile").argv[0] == \
        "msopprof"


# --------------------------------------------------------------------------- g++ checks


def _rewrite_launches(text: str) -> str:
    """`k<<<n, x, s>>>(args)` -> `opbot_stub::Launch(n, x, s, k, args)`: g++ has no <<<>>>."""
    return re.sub(r"(\w+)<<<([^;]*?)>>>\(", r"opbot_stub::Launch(\2, \1, ", text)


_ENTRY = re.compile(r'extern "C" __global__ __aicore__ void (\w+)\(([^)]*)\)')


def _aclrtlaunch_headers(kernel: str, folder: Path) -> None:
    """What ascendc_library generates: aclrtlaunch_<entry>.h, GM_ADDR as void*."""
    for match in _ENTRY.finditer(kernel):
        params = re.sub(r"\bGM_ADDR\b", "void*", " ".join(match.group(2).split()))
        (folder / f"aclrtlaunch_{match.group(1)}.h").write_text(
            '#include "acl/acl.h"\n#ifndef ACLRT_LAUNCH_KERNEL\n'
            "#define ACLRT_LAUNCH_KERNEL(kernel) aclrtlaunch_##kernel\n#endif\n"
            f'extern "C" uint32_t aclrtlaunch_{match.group(1)}(uint32_t blockDim, '
            f"aclrtStream stream, {params});\n")


def _gxx(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    assert GXX is not None
    return subprocess.run([GXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=300)


def _binding_check(generation: str, folder: Path, torch_include: list[str]) -> \
        subprocess.CompletedProcess[str]:
    source = folder / "op.cpp"
    includes = [f"-I{STUBS / 'host'}", *torch_include, f"-I{folder}"]
    if generation == "legacy":
        launch = folder / "launch"
        launch.mkdir(exist_ok=True)
        kernel = next(folder.glob("*_kernel.cpp")).read_text()
        _aclrtlaunch_headers(kernel, launch)
        return _gxx(["-fsyntax-only", *includes, f"-I{launch}", str(source)], folder)
    rewritten = folder / "op_rewritten.cpp"
    rewritten.write_text(_rewrite_launches(source.read_text()))
    return _gxx(["-fsyntax-only", "-x", "c++", "-DOPBOT_STUB_ASC", "-include", "opbot_launch.h",
                 f"-I{STUBS / 'kernel'}", *includes, str(rewritten)], folder)


def _twin_build(generation: str, folder: Path, binary: Path) -> \
        subprocess.CompletedProcess[str]:
    includes = [f"-I{STUBS / 'kernel'}", f"-I{STUBS / 'host'}", f"-I{folder}"]
    if generation == "legacy":
        kernel = next(folder.glob("*_kernel.cpp"))
        return _gxx(["-O1", *includes, str(folder / "cpu_twin.cpp"), str(kernel), "-o",
                     str(binary)], folder)
    rewritten = folder / "cpu_twin_rewritten.cpp"
    rewritten.write_text(_rewrite_launches((folder / "cpu_twin.asc").read_text()))
    return _gxx(["-O1", "-x", "c++", "-DASCENDC_CPU_DEBUG", "-DOPBOT_STUB_ASC", *includes,
                 str(rewritten), "-o", str(binary)], folder)


@dataclass(frozen=True)
class _Built:
    folder: Path
    twin: Path
    twin_log: str
    binding_log: str
    ok: bool


def _build_one(generation: str, op: str, files: dict[str, str], root: Path) -> _Built:
    write_package(files, root / generation / op)
    folder = root / generation / op / "ascendc"
    twin = folder / "twin"
    binding = _binding_check(generation, folder, [f"-I{STUBS / 'torch'}"])
    built = _twin_build(generation, folder, twin)
    return _Built(folder, twin, built.stderr, binding.stderr,
                  built.returncode == 0 and binding.returncode == 0)


@pytest.fixture(scope="module")
def built(packages: dict[tuple[str, str], Generated],
          tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], _Built]:
    if GXX is None:
        pytest.skip("g++ is not installed")
    root = tmp_path_factory.mktemp("ascendc-built")
    jobs: dict[tuple[str, str], dict[str, str]] = {key: value.files
                                                   for key, value in packages.items()}
    jobs[("legacy", "sink")] = _generate("sink", SINK, "legacy").files
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {key: pool.submit(_build_one, key[0], key[1], files, root)
                   for key, files in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


@needs_gxx
@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_sources_compile_against_the_stub_headers(built: dict[tuple[str, str], _Built],
                                                  generation: str, op: str) -> None:
    result = built[(generation, op)]
    assert result.ok, f"binding:\n{result.binding_log}\ncpu twin:\n{result.twin_log}"


def _reference(model: torch.nn.Module, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad():
        output = model(*inputs)
    return list(output) if isinstance(output, tuple) else [output]


def _run_twin(result: _Built, model: torch.nn.Module, inputs: list[torch.Tensor],
              cores: int = 40) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    folder = result.folder
    expected = _reference(model, inputs)
    paths = []
    for index, tensor in enumerate(inputs):
        path = folder / f"in{index}.bin"
        tensor.contiguous().numpy().tofile(path)
        paths.append(str(path))
    outs = [str(folder / f"out{index}.bin") for index in range(len(expected))]
    dtype = str(inputs[0].dtype).removeprefix("torch.")
    run = subprocess.run([str(result.twin), dtype, str(inputs[0].numel()), str(cores),
                          str(192 * 1024), *paths, *outs], capture_output=True, text=True,
                         check=False, timeout=300)
    assert run.returncode == 0, run.stderr
    actual = [torch.from_file(path, size=want.numel(), dtype=want.dtype).reshape(want.shape)
              for path, want in zip(outs, expected, strict=True)]
    return actual, expected


_TOLERANCE = {torch.float32: (1e-5, 1.3e-6), torch.float16: (1e-5, 1e-3)}


def _assert_close(actual: list[torch.Tensor], expected: list[torch.Tensor],
                  slack: float = 1.0) -> None:
    for got, want in zip(actual, expected, strict=True):
        atol, rtol = _TOLERANCE[want.dtype]
        torch.testing.assert_close(got, want, atol=atol * slack, rtol=rtol * slack)


@needs_gxx
@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_cpu_twins_match_the_reference(built: dict[tuple[str, str], _Built], generation: str,
                                       op: str) -> None:
    result = built[(generation, op)]
    if not result.ok:
        pytest.fail(result.twin_log + result.binding_log)
    example = EXAMPLES[op]
    generator = torch.Generator().manual_seed(7)
    for dtype in example.dtypes:
        for size in TWIN_SIZES:
            inputs = [(torch.randn(size, generator=generator) * 3).to(dtype)
                      for _ in range(example.inputs)]
            actual, expected = _run_twin(result, example.model, inputs)
            _assert_close(actual, expected)


ADD_REFERENCE = """import torch


class Model(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def get_inputs():
    return [torch.randn(127, 4099), torch.randn(127, 4099)]
"""


@needs_gxx
def test_the_generated_tests_drive_the_cpu_twin(built: dict[tuple[str, str], _Built]) -> None:
    """The package's own pytest file, run as a user would after ./build.sh --cpu (the twin
    here is the stub-built one): the cpu_twin tests pass, the NPU tests skip."""
    import sys

    result = built[("legacy", "add")]
    assert result.ok, result.twin_log
    (result.folder.parent / "reference.py").write_text(ADD_REFERENCE)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_add_npu.py", "-q", "-p", "no:cacheprovider",
         "-rs"], cwd=result.folder, capture_output=True, text=True, check=False, timeout=600,
        env={**os.environ, "OPBOT_ASCENDC_CPU_TWIN": str(result.twin)})
    assert run.returncode == 0, run.stdout[-3000:]
    summary = run.stdout.strip().splitlines()[-1]
    cases = len(EXAMPLES["add"].dtypes) * (1 + len(TAIL_SIZES_IN_PACKAGE))
    # Skipped: the NPU tests, one per case plus ordering, device mixing, device guard.
    assert f"{cases} passed, {cases + 3} skipped" in summary, run.stdout[-2000:]


@needs_gxx
def test_every_lowering_rule_computes_what_torch_does(
        built: dict[tuple[str, str], _Built]) -> None:
    result = built[("legacy", "sink")]
    assert result.ok, result.twin_log
    generator = torch.Generator().manual_seed(11)
    for size in (33, 70001):
        inputs = [torch.randn(size, generator=generator) for _ in range(2)]
        actual, expected = _run_twin(result, SINK.model, inputs, cores=7)
        # Long chains in float32: allow a few roundings more than one op's tolerance.
        _assert_close(actual, expected, slack=8.0)


@needs_gxx
def test_host_tiling_agrees_with_the_simulator(packages: dict[tuple[str, str], Generated],
                                               tmp_path: Path) -> None:
    files = packages[("legacy", "add")].files
    write_package(files, tmp_path)
    driver = tmp_path / "ascendc" / "tiling_driver.cpp"
    driver.write_text(
        '#include <cstdio>\n#include "add_tiling.h"\nint main() {\n'
        "    unsigned long long total, bytes, cores, ub;\n"
        '    while (std::scanf("%llu %llu %llu %llu", &total, &bytes, &cores, &ub) == 4) {\n'
        "        const add_tiling::TilingData t =\n"
        "            add_tiling::ComputeTiling(total, bytes, cores, ub);\n"
        '        std::printf("%u %u %u\\n", t.blockDim, t.blockLength, t.tileLength);\n'
        "    }\n}\n")
    assert _gxx(["-O1", str(driver), "-o", str(tmp_path / "tiling")], tmp_path).returncode == 0
    problems = [(total, dtype_bytes, cores, ub)
                for total in (0, 1, 31, 32, 33, 1000, 4099, 65537, 1000003, 2**31 + 7)
                for dtype_bytes in (2, 4) for cores in (1, 7, 40, 48)
                for ub in (192 * 1024, 256 * 1024, 8 * 1024 + 300)]
    stdin = "".join(f"{a} {b} {c} {d}\n" for a, b, c, d in problems)
    output = subprocess.run([str(tmp_path / "tiling")], input=stdin, capture_output=True,
                            text=True, check=True).stdout.split("\n")
    for (total, dtype_bytes, cores, ub), line in zip(problems, output, strict=False):
        config = TilingConfig(total=total, dtype_bytes=dtype_bytes, cores=cores, ub_bytes=ub,
                              queues=3, scratch_bytes_per_element=scratch_bytes(
                                  0, inputs=2, outputs=1, dtype_bytes=dtype_bytes))
        plan = plan_tiling(config)
        assert line.split() == [str(plan.block_dim), str(plan.block_length),
                                str(plan.tile_length)], (total, dtype_bytes, cores, ub)


@pytest.mark.parametrize("generation", GENERATIONS)
def test_the_binding_orders_guards_and_checks_its_launches(
        packages: dict[tuple[str, str], Generated], generation: str) -> None:
    binding = packages[(generation, "add")].files["ascendc/op.cpp"]
    code = "\n".join(line for line in binding.splitlines()
                     if not line.lstrip().startswith("//"))
    # Ordering: stream() empties torch_npu's task queue; stream(false) would race it.
    assert "c10_npu::getCurrentNPUStream().stream();" in code
    assert "stream(false)" not in code
    # The device guard comes after the checks and before anything uses the device.
    body = code[code.index("add_npu("):]
    positions = [body.index(marker) for marker in (
        'CheckInputs({{"x", x_c}, {"y", y_c}});', "const c10::DeviceGuard guard(x_c.device());",
        "at::empty_like(x_c)", ".stream();", "Launch(")]
    assert positions == sorted(positions)
    assert "tensor.device() == first.second.device()" in code
    assert "all tensors must be on one NPU device" in " ".join(
        part.strip().strip('"') for part in code.split('"\n'))
    # Every launch's error code is checked, naming the kernel.
    for entry in ("add_float32", "add_float16"):
        if generation == "legacy":
            assert f'CheckLaunch("{entry}", ACLRT_LAUNCH_KERNEL({entry})(tiling.blockDim, ' \
                   "stream," in code
        else:
            launch = code.index(f"{entry}<<<tiling.blockDim, 0, stream>>>(")
            after = code[launch:].split(";", 2)[1]
            assert f'CheckLaunch("{entry}", aclrtGetLastError(ACL_RT_THREAD_LEVEL))' in after
    if generation == "asc":  # a stale error is cleared before the launch
        assert code.index("(void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);") < code.index("<<<")


def test_the_benchmark_brackets_each_call_with_events_on_an_idle_stream(
        packages: dict[tuple[str, str], Generated], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """bench.py's time_ms against a torch_npu that logs: the device is synchronized before
    each start event, both events go on the current stream, the end one is waited for."""
    import importlib.util
    import sys
    import types

    log: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing
            self.name = "start" if sum(entry.startswith("new") for entry in log) % 2 == 0 \
                else "end"
            log.append(f"new {self.name}")

        def record(self, stream: object = None) -> None:
            log.append(f"record {self.name} on {stream}")

        def synchronize(self) -> None:
            log.append(f"wait {self.name}")

        def elapsed_time(self, other: Event) -> float:
            return 1.5

    npu = types.SimpleNamespace(Event=Event, current_stream=lambda: "current",
                                synchronize=lambda: log.append("synchronize"))
    monkeypatch.setitem(sys.modules, "torch_npu", types.SimpleNamespace(npu=npu))
    bench = tmp_path / "bench_add.py"
    bench.write_text(packages[("legacy", "add")].files["ascendc/bench_add.py"])
    spec = importlib.util.spec_from_file_location("opbot_bench_probe", bench)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    times = module.time_ms(lambda: log.append("call"), 2, 2)
    assert times == [1.5, 1.5]
    trial = ["new start", "new end", "synchronize", "record start on current", "call",
             "record end on current", "wait end"]
    assert log == ["synchronize", "call", "call", *trial, *trial, "synchronize"]


_DRIVER = r"""
#include <cstdio>
#include <exception>
#include "op.cpp"

static uint32_t g_code = 0;
static int g_launches = 0;
static bool g_guarded = false;
static bool g_emptied = false;

static uint32_t Record()
{
    ++g_launches;
    g_guarded = c10::opbot_current_device() == c10::Device(c10::DeviceType::PrivateUse1, 1);
    g_emptied = c10_npu::opbot_stream_emptied_queue();
    return g_code;
}
extern "C" uint32_t aclrtlaunch_add_float32(uint32_t, aclrtStream, void*, void*, void*, uint32_t,
                                            uint32_t, uint32_t) { return Record(); }
extern "C" uint32_t aclrtlaunch_add_float16(uint32_t, aclrtStream, void*, void*, void*, uint32_t,
                                            uint32_t, uint32_t) { return Record(); }

template <typename Fn>
static void Try(const char* label, Fn fn)
{
    try {
        fn();
        std::printf("%s: ok\n", label);
    } catch (const std::exception& error) {
        std::printf("%s: %s\n", label, error.what());
    }
}

int main()
{
    const c10::Device npu0(c10::DeviceType::PrivateUse1, 0);
    const c10::Device npu1(c10::DeviceType::PrivateUse1, 1);
    const c10::Device cpu(c10::DeviceType::CPU, -1);
    Try("cpu", [&] { add_npu(at::Tensor(cpu, 1000), at::Tensor(cpu, 1000)); });
    Try("devices", [&] { add_npu(at::Tensor(npu1, 1000), at::Tensor(npu0, 1000)); });
    std::printf("launches before: %d\n", g_launches);
    Try("run", [&] { add_npu(at::Tensor(npu1, 1000), at::Tensor(npu1, 1000)); });
    std::printf("guarded: %d emptied: %d current after: %d\n", g_guarded, g_emptied,
                static_cast<int>(c10::opbot_current_device().index()));
    g_code = 507015;
    Try("failing launch", [&] { add_npu(at::Tensor(npu1, 1000), at::Tensor(npu1, 1000)); });
    return 0;
}
"""


@needs_gxx
def test_the_binding_refuses_mixed_devices_and_failed_launches(
        packages: dict[tuple[str, str], Generated], tmp_path: Path) -> None:
    """The legacy binding, run against the stubs: device checks, the guard, the queue
    emptied before the launch, and a launch's error code raised with the kernel's name."""
    write_package(packages[("legacy", "add")].files, tmp_path)
    folder = tmp_path / "ascendc"
    launch = folder / "launch"
    launch.mkdir()
    _aclrtlaunch_headers((folder / "add_kernel.cpp").read_text(), launch)
    (folder / "driver.cpp").write_text(_DRIVER)
    built = _gxx([f"-I{STUBS / 'host'}", f"-I{STUBS / 'torch'}", f"-I{folder}", f"-I{launch}",
                  str(folder / "driver.cpp"), "-o", str(folder / "driver")], folder)
    assert built.returncode == 0, built.stderr
    lines = subprocess.run([str(folder / "driver")], capture_output=True, text=True,
                           check=True, timeout=60).stdout.splitlines()
    assert lines[0] == "cpu: add: x must be an NPU tensor, not one on 0:-1"
    assert lines[1] == ("devices: add: all tensors must be on one NPU device, but x is on 20:1 "
                        "and y on 20:0")
    assert lines[2] == "launches before: 0"
    assert lines[3] == "run: ok"
    assert lines[4] == "guarded: 1 emptied: 1 current after: -1"
    assert lines[5].startswith("failing launch: add: launching kernel add_float32 failed with "
                               "error code 507015")


@pytest.mark.skipif(os.environ.get("OPBOT_ASCENDC_REAL_TORCH") != "1" or GXX is None,
                    reason="slow (torch headers): set OPBOT_ASCENDC_REAL_TORCH=1")
def test_bindings_compile_against_the_real_torch_headers(
        packages: dict[tuple[str, str], Generated], tmp_path: Path) -> None:
    include = Path(torch.__file__).parent / "include"
    flags = [f"-I{include}", f"-I{include / 'torch/csrc/api/include'}",
             "-Wno-c++20-extensions", "-Wno-unused-parameter"]
    for generation in GENERATIONS:
        write_package(packages[(generation, "add")].files, tmp_path / generation)
        result = _binding_check(generation, tmp_path / generation / "ascendc", flags)
        assert result.returncode == 0, result.stderr


# --------------------------------------------------------------------------- offline scope


class _Softmax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


class _Bias(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bias


class _Broadcast(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * y


class _Erf(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.erf(x) + torch.sin(x) + torch.where(x > 0.5, x, -x)


class _Matmul(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ x.T)


def _lowered(model: torch.nn.Module, *inputs: torch.Tensor) -> object:
    return lower(lower_program(export_reference(model, list(inputs))))


@pytest.mark.parametrize(("model", "inputs", "expected"), [
    (_Softmax(), [torch.randn(4, 8)], "reduce:amax"),
    (_Bias(), [torch.randn(4, 8)], "module parameter or buffer bias"),
    (_Broadcast(), [torch.randn(4, 8), torch.randn(8)], "broadcast"),
    (_Erf(), [torch.randn(4, 8)], "erf"),
    (_Matmul(), [torch.randn(4, 8)], "matmul:mm"),
    (_Relu(), [torch.randint(0, 5, (4, 8), dtype=torch.int32)], "dtype int32"),
])
def test_out_of_scope_references_are_unsupported(model: torch.nn.Module,
                                                 inputs: list[torch.Tensor],
                                                 expected: str) -> None:
    result = _lowered(model, *inputs)
    assert isinstance(result, Unsupported)
    assert any(expected in op for op in result.ops), result.ops
    assert expected in result.reason


def test_unsupported_lists_every_offending_op() -> None:
    result = _lowered(_Erf(), torch.randn(4, 8))
    assert isinstance(result, Unsupported)
    assert {"erf", "sin"} <= set(result.ops)
    assert any(op.startswith("where") for op in result.ops)


@pytest.mark.parametrize("name", ["kb_01_relu", "kb_02_gelu", "kb_03_leaky_relu", "kb_04_swish",
                                  "kb_05_hardtanh_clamp"])
def test_elementwise_references_generate(name: str) -> None:
    from bot.agent.backends.ascendc.offline import generate_from_reference

    result = generate_from_reference(REFS / f"{name}.py", "op", cases=[], init_args=None)
    assert isinstance(result, Generated), result
    assert lint_package(result.files) == []


def test_broadcasting_references_are_unsupported() -> None:
    from bot.agent.backends.ascendc.offline import generate_from_reference

    result = generate_from_reference(REFS / "kb_06_broadcast_fma.py", "fma", cases=[],
                                     init_args=None)
    assert isinstance(result, Unsupported)
    assert any("broadcast" in op for op in result.ops)


def test_leaky_relu_becomes_one_instruction() -> None:
    class Leaky(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.leaky_relu(x, 0.1)

    for dtype in (torch.float32, torch.float16):
        result = _lowered(Leaky(), torch.randn(4, 8, dtype=dtype))
        assert not isinstance(result, Unsupported)
        assert [line for line in result.body.compute if not line.startswith("//")] == [  # type: ignore[attr-defined]
            "AscendC::LeakyRelu(y0, x0, 0.1f, count);"]


def test_float16_and_float32_traces_share_one_kernel() -> None:
    class Silu(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.silu(x)

    graphs = _graphs(_Example(Silu(), 1))
    result = generate(graphs, "silu")
    assert isinstance(result, Generated)
    assert result.dtypes == ("float32", "float16")
    assert "KernelSilu<half>" in result.files["ascendc/silu_kernel.cpp"]


# --------------------------------------------------------------------------- requests


def test_a_hand_written_kernel_must_declare_its_scratch() -> None:
    body = KernelBody(compute=(), compute_slots=0, summary="x")
    request = PackageRequest(op="mine", generation="legacy", body=body, inputs=("x",),
                             kernel_source="// no slots declared\n")
    with pytest.raises(PackageError, match="COMPUTE_SLOTS"):
        render_package(request)
    declared = PackageRequest(op="mine", generation="legacy", body=body, inputs=("x",),
                              kernel_source="constexpr uint32_t COMPUTE_SLOTS = 5;\n")
    files = render_package(declared)
    assert "constexpr uint64_t COMPUTE_SLOTS = 5;" in files["ascendc/mine_tiling.h"]


@pytest.mark.parametrize(("change", "message"), [
    ({"op": "Bad-Name"}, "must match"),
    ({"dtypes": ("bfloat16",)}, "kernels exist for"),
    ({"generation": "cann7"}, "generation"),
])
def test_bad_requests_are_refused(change: dict[str, object], message: str) -> None:
    base = {"op": "ok", "generation": "legacy", "inputs": ("x",),
            "body": KernelBody(compute=("// y0 = copy(x0)",), compute_slots=0, summary="x")}
    with pytest.raises(PackageError, match=message):
        render_package(PackageRequest(**{**base, **change}))  # type: ignore[arg-type]


def test_argument_names_never_shadow_the_templates_locals() -> None:
    body = KernelBody(compute=("AscendC::Add(y0, x0, x1, count);",), compute_slots=0,
                      summary="x")
    files = render_package(PackageRequest(op="odd", generation="legacy", body=body,
                                          inputs=("count", "class")))
    assert "GM_ADDR count_in, GM_ADDR class_in, GM_ADDR out" in files["ascendc/odd_kernel.cpp"]


def _iter_lines(files: dict[str, str]) -> Iterator[str]:
    for text in files.values():
        yield from text.splitlines()


def test_nothing_hard_codes_the_install_root(packages: dict[tuple[str, str], Generated]) -> None:
    check: Callable[[str], bool] = lambda line: "/usr/local/Ascend" not in line  # noqa: E731
    for package in packages.values():
        assert all(check(line) for line in _iter_lines(package.files))


# --------------------------------------------------------------------------- prompts


@pytest.mark.parametrize("generation", GENERATIONS)
def test_the_prompt_example_is_the_golden_generated_kernel(generation: str) -> None:
    from bot.agent.backends.ascendc.prompts import kernel_contract, system_prompt, worked_example

    extension = "cpp" if generation == "legacy" else "asc"
    golden = GOLDEN / generation / "gelu" / "ascendc" / f"gelu_kernel.{extension}"
    assert worked_example(generation) == golden.read_text(encoding="utf-8")
    contract = kernel_contract("add", inputs=["x", "y"], outputs=1, dtypes=["float32"],
                               generation=generation)  # type: ignore[arg-type]
    kernel = (GOLDEN / generation / "add" / "ascendc" / f"add_kernel.{extension}").read_text()
    signature = contract.split("void ", 1)[1].split(")", 1)[0]
    assert " ".join(signature.split()) in " ".join(kernel.split())
    assert ("__vector__" in system_prompt(generation)) == (generation == "asc")  # type: ignore[arg-type]
