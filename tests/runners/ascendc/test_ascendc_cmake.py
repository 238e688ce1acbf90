"""The generated CMakeLists.txt through a real `cmake` configure, on fake CANN toolkits.

No Ascend compiler exists here, so only the configure step runs: the toolkits built in
tmp_path hold a fake ascendc.cmake (its `ascendc_library` records what it was given, and a
`host_intf_pub` that forces `_GLIBCXX_USE_CXX11_ABI=0`, as the real one does) or a fake
asc-config.cmake whose ASC language hands its compile line to the host compiler. The
generated Makefiles (flags.make) then show what each target would be compiled with.

Layouts per release (docs/ascend-toolchain.md §0, §5; asc-devkit cmake/CMakeLists.txt):
8.0-8.3 `compiler/` or `tools/tikcpp/ascendc_kernel_cmake`, 8.5 `<arch>-linux/tikcpp/...`,
9.x `<arch>-linux/tikcpp/...` next to `<arch>-linux/lib64/cmake/asc-config.cmake`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from runners.ascendc.detect import ASCENDC_CMAKE_DIRS, machine_arch
from runners.ascendc.package import (
    BuildContext,
    KernelBody,
    PackageRequest,
    build_plan,
    render_package,
    write_package,
)

CMAKE = shutil.which("cmake")
GXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(CMAKE is None or GXX is None,
                                reason="needs cmake and g++ (configure only)")
ARCH = machine_arch()

FAKE_ASCENDC_CMAKE = """
# Fake ascendc.cmake: what opbot's CMakeLists.txt needs from the real one, recorded.
add_library(host_intf_pub INTERFACE)
target_compile_definitions(host_intf_pub INTERFACE _GLIBCXX_USE_CXX11_ABI=0)
function(ascendc_library name type)
    file(WRITE "${CMAKE_BINARY_DIR}/ascendc_library.txt"
         "file=${CMAKE_CURRENT_FUNCTION_LIST_FILE}\\nname=${name}\\ntype=${type}\\n"
         "sources=${ARGN}\\nsoc=${SOC_VERSION}\\n")
    file(WRITE "${CMAKE_BINARY_DIR}/kernels_stub.cpp" "int opbot_fake_kernels = 0;\\n")
    add_library(${name} ${type} "${CMAKE_BINARY_DIR}/kernels_stub.cpp")
    # Like the real function: host_intf_pub is private to the kernel library.
    target_link_libraries(${name} PRIVATE host_intf_pub INTERFACE ascendcl tiling_api)
endfunction()
"""

FAKE_TORCH_CONFIG = """
# Fake TorchConfig.cmake: the variables and the imported target opbot uses.
add_library(torch INTERFACE IMPORTED)
set(TORCH_LIBRARIES torch)
set(TORCH_INCLUDE_DIRS "${CMAKE_CURRENT_LIST_DIR}/include")
set(TORCH_CXX_FLAGS "@CXX_FLAGS@")
if(TORCH_CXX_FLAGS)
    set_property(TARGET torch PROPERTY INTERFACE_COMPILE_OPTIONS "${TORCH_CXX_FLAGS}")
endif()
set(Torch_FOUND TRUE)
"""

FAKE_ASC_CONFIG = """
# Fake asc-config.cmake: the ASC language, compiled by the host compiler.
list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}/asc_modules")
set(ASC_FOUND TRUE)
"""

FAKE_ASC_MODULES = {
    "CMakeDetermineASCCompiler.cmake": """
set(CMAKE_ASC_COMPILER "@GXX@")
set(CMAKE_ASC_COMPILER_ENV_VAR "ASC")
configure_file(${CMAKE_CURRENT_LIST_DIR}/CMakeASCCompiler.cmake.in
               ${CMAKE_PLATFORM_INFO_DIR}/CMakeASCCompiler.cmake @ONLY)
""",
    "CMakeASCCompiler.cmake.in": """
set(CMAKE_ASC_COMPILER "@CMAKE_ASC_COMPILER@")
set(CMAKE_ASC_COMPILER_LOADED 1)
set(CMAKE_ASC_SOURCE_FILE_EXTENSIONS asc)
set(CMAKE_ASC_OUTPUT_EXTENSION .o)
set(CMAKE_ASC_COMPILER_ENV_VAR "ASC")
""",
    "CMakeASCInformation.cmake": """
set(CMAKE_INCLUDE_FLAG_ASC "-I")
set(CMAKE_ASC_COMPILE_OPTIONS_PIC "-fPIC")
file(WRITE "${CMAKE_BINARY_DIR}/asc_language.txt"
     "standard=${CMAKE_ASC_STANDARD}\\narchitectures=${CMAKE_ASC_ARCHITECTURES}\\n")
string(APPEND CMAKE_ASC_FLAGS " --npu-arch=${CMAKE_ASC_ARCHITECTURES}")
set(CMAKE_ASC_COMPILE_OBJECT "<CMAKE_ASC_COMPILER> <DEFINES> <INCLUDES> \
-std=c++${CMAKE_ASC_STANDARD} <FLAGS> -o <OBJECT> -c <SOURCE>")
set(CMAKE_ASC_CREATE_SHARED_LIBRARY "<CMAKE_ASC_COMPILER> <LANGUAGE_COMPILE_FLAGS> \
<LINK_FLAGS> -shared -o <TARGET> <OBJECTS> <LINK_LIBRARIES>")
set(CMAKE_ASC_LINK_EXECUTABLE
    "<CMAKE_ASC_COMPILER> <FLAGS> <LINK_FLAGS> <OBJECTS> -o <TARGET> <LINK_LIBRARIES>")
set(CMAKE_ASC_INFORMATION_LOADED 1)
""",
    "CMakeTestASCCompiler.cmake": 'set(CMAKE_ASC_COMPILER_WORKS 1 CACHE INTERNAL "")\n',
}


@dataclass(frozen=True)
class Configured:
    returncode: int
    output: str
    build: Path

    def flags(self, target: str) -> dict[str, str]:
        """flags.make of a target: {"CXX_DEFINES": ..., "ASC_FLAGS": ...}."""
        text = (self.build / "CMakeFiles" / f"{target}.dir" / "flags.make").read_text()
        return {key.strip(): value.strip() for key, _, value in
                (line.partition("=") for line in text.splitlines())
                if value and not key.startswith("#")}

    def record(self, name: str) -> dict[str, str]:
        text = (self.build / name).read_text()
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _request(generation: str) -> PackageRequest:
    body = KernelBody(compute=("AscendC::Add(y0, x0, x1, count);",), compute_slots=0,
                      summary="x + y")
    return PackageRequest(op="add", generation=generation,  # type: ignore[arg-type]
                          body=body, inputs=("x", "y"), dtypes=("float32", "float16"))


def _toolkit(root: Path, version: str, ascendc_dir: str | None, *,
             asc_config: bool = False) -> Path:
    """A CANN toolkit with ascendc.cmake in `ascendc_dir` (relative; None: nowhere)."""
    home = root / f"cann-{version}"
    for folder in ("include", "lib64", f"{ARCH}-linux/include", f"{ARCH}-linux/lib64"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    (home / f"{ARCH}-linux" / "ascend_toolkit_install.info").write_text(f"version={version}\n")
    if ascendc_dir is not None:
        (home / ascendc_dir).mkdir(parents=True, exist_ok=True)
        (home / ascendc_dir / "ascendc.cmake").write_text(FAKE_ASCENDC_CMAKE)
    if asc_config:
        config = home / f"{ARCH}-linux" / "lib64" / "cmake"
        (config / "asc_modules").mkdir(parents=True)
        (config / "asc-config.cmake").write_text(FAKE_ASC_CONFIG)
        for name, text in FAKE_ASC_MODULES.items():
            (config / "asc_modules" / name).write_text(text.replace("@GXX@", str(GXX)))
    return home


def _torch(root: Path, cxx_flags: str) -> tuple[Path, Path]:
    """A fake torch (its cmake prefix, as torch.utils.cmake_prefix_path) and torch_npu."""
    prefix = root / "torch" / "share" / "cmake"
    (prefix / "Torch").mkdir(parents=True)
    (prefix / "Torch" / "TorchConfig.cmake").write_text(
        FAKE_TORCH_CONFIG.replace("@CXX_FLAGS@", cxx_flags))
    torch_npu = root / "torch_npu"
    for folder in ("include", "lib"):
        (torch_npu / folder).mkdir(parents=True)
    return prefix, torch_npu


def _configure(tmp_path: Path, generation: str, home: Path, *, abi: str = "1",
               torch_flags: str = "", extra: tuple[str, ...] = ()) -> Configured:
    """The package's own configure step (its BuildPlan), run with g++ as the compiler."""
    package = tmp_path / "op"
    write_package(render_package(_request(generation)), package)
    prefix, torch_npu = _torch(tmp_path, torch_flags)
    context = BuildContext(cann_home=str(home), soc="Ascend910B3", npu_arch="dav-2201",
                           torch_cmake_prefix=str(prefix), torch_npu_path=str(torch_npu),
                           cxx11_abi=abi, python="python3")
    plan = build_plan("add", generation, "npu", context=context)  # type: ignore[arg-type]
    argv = [*plan.step("configure").argv, "-G", "Unix Makefiles",
            f"-DCMAKE_CXX_COMPILER={GXX}", *extra]
    env = {**os.environ, "ASCEND_HOME_PATH": str(home)}
    result = subprocess.run(argv, cwd=package / "ascendc", capture_output=True, text=True,
                            check=False, timeout=240, env=env)
    return Configured(result.returncode, result.stdout + result.stderr,
                      package / "ascendc" / "build-npu")


# --------------------------------------------------------------------------- legacy


@pytest.mark.parametrize(("version", "place"), [
    ("8.0.RC3", "compiler/tikcpp/ascendc_kernel_cmake"),
    ("8.3.RC1", "tools/tikcpp/ascendc_kernel_cmake"),
    ("8.5.0", f"{ARCH}-linux/tikcpp/ascendc_kernel_cmake"),
    ("9.0.0", f"{ARCH}-linux/tikcpp/ascendc_kernel_cmake"),
])
def test_legacy_finds_ascendc_cmake_in_every_layout(tmp_path: Path, version: str,
                                                    place: str) -> None:
    home = _toolkit(tmp_path, version, place, asc_config=version.startswith("9"))
    result = _configure(tmp_path, "legacy", home)
    assert result.returncode == 0, result.output
    record = result.record("ascendc_library.txt")
    assert record["file"] == str(home / place / "ascendc.cmake")
    assert (record["name"], record["type"], record["soc"]) == (
        "add_kernels", "SHARED", "Ascend910B3")
    assert record["sources"].endswith("/add_kernel.cpp")
    assert f"ascendc.cmake: {home / place}" in result.output


def test_legacy_binding_takes_torchs_abi_not_host_intf_pub(tmp_path: Path) -> None:
    home = _toolkit(tmp_path, "8.5.0", f"{ARCH}-linux/tikcpp/ascendc_kernel_cmake")
    result = _configure(tmp_path, "legacy", home, abi="1")
    assert result.returncode == 0, result.output
    ops = result.flags("add_ops")
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in ops["CXX_DEFINES"].split()
    assert "_GLIBCXX_USE_CXX11_ABI=0" not in " ".join(ops.values())
    # The kernel library keeps the toolkit's own flags (only extern "C" crosses over).
    kernels = result.flags("add_kernels")
    assert "-D_GLIBCXX_USE_CXX11_ABI=0" in kernels["CXX_DEFINES"].split()
    # Headers of the 8.5 layout (<arch>-linux/include) and torch_npu are found.
    includes = ops["CXX_INCLUDES"]
    assert f"{home}/{ARCH}-linux/include" in includes
    assert "torch_npu/include" in includes
    assert "build-npu/include/add_kernels" in includes


def test_an_older_torchs_abi_comes_from_torch_cxx_flags(tmp_path: Path) -> None:
    home = _toolkit(tmp_path, "8.3.RC1", "tools/tikcpp/ascendc_kernel_cmake")
    result = _configure(tmp_path, "legacy", home, abi="", torch_flags="-D_GLIBCXX_USE_CXX11_ABI=0")
    assert result.returncode == 0, result.output
    defines = result.flags("add_ops")["CXX_DEFINES"].split()
    assert "-D_GLIBCXX_USE_CXX11_ABI=0" in defines
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" not in defines


def test_an_abi_that_contradicts_torch_fails_the_configure(tmp_path: Path) -> None:
    home = _toolkit(tmp_path, "8.3.RC1", "tools/tikcpp/ascendc_kernel_cmake")
    result = _configure(tmp_path, "legacy", home, abi="1",
                        torch_flags="-D_GLIBCXX_USE_CXX11_ABI=0")
    assert result.returncode != 0
    assert "torch was built with _GLIBCXX_USE_CXX11_ABI=0" in result.output


def test_without_ascendc_cmake_the_configure_fails_naming_every_place(tmp_path: Path) -> None:
    home = _toolkit(tmp_path, "9.0.0", None)
    result = _configure(tmp_path, "legacy", home)
    assert result.returncode != 0
    assert "ascendc.cmake not found" in result.output
    flat = " ".join(result.output.split())
    for place in ASCENDC_CMAKE_DIRS:
        assert str(home / place.format(arch=ARCH)) in flat, result.output
    assert "-DASCENDC_CMAKE_DIR" in flat


def test_an_explicit_ascendc_cmake_dir_wins(tmp_path: Path) -> None:
    home = _toolkit(tmp_path, "8.3.RC1", None)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "ascendc.cmake").write_text(FAKE_ASCENDC_CMAKE)
    result = _configure(tmp_path, "legacy", home, extra=(f"-DASCENDC_CMAKE_DIR={elsewhere}",))
    assert result.returncode == 0, result.output
    assert result.record("ascendc_library.txt")["file"] == str(elsewhere / "ascendc.cmake")


def test_the_arch_folder_follows_the_target_processor(tmp_path: Path) -> None:
    """arm64 (as macOS-style toolchains name it) means CANN's aarch64-linux folder."""
    home = _toolkit(tmp_path, "8.5.0", "aarch64-linux/tikcpp/ascendc_kernel_cmake")
    result = _configure(tmp_path, "legacy", home, extra=(
        "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=arm64"))
    assert result.returncode == 0, result.output
    assert result.record("ascendc_library.txt")["file"] == str(
        home / "aarch64-linux/tikcpp/ascendc_kernel_cmake/ascendc.cmake")


# --------------------------------------------------------------------------- ASC


def _gcc_prefix() -> str:
    assert GXX is not None
    return str(Path(os.path.realpath(GXX)).parent.parent)


def test_asc_binding_gets_torch_flags_gcc_toolchain_and_torchs_abi(tmp_path: Path) -> None:
    home = _toolkit(tmp_path, "9.0.0", f"{ARCH}-linux/tikcpp/ascendc_kernel_cmake",
                    asc_config=True)
    result = _configure(tmp_path, "asc", home, abi="1",
                        torch_flags="-D_GLIBCXX_USE_CXX11_ABI=1 -fno-math-errno")
    assert result.returncode == 0, result.output
    assert result.record("asc_language.txt") == {"standard": "17", "architectures": "dav-2201"}
    ops = result.flags("add_ops")
    assert "CXX_FLAGS" not in ops  # op.cpp is compiled as ASC, not CXX
    flags = ops["ASC_FLAGS"].split()
    assert f"--gcc-toolchain={_gcc_prefix()}" in flags
    assert "-fno-math-errno" in flags  # TORCH_CXX_FLAGS, split into separate options
    assert "--npu-arch=dav-2201" in flags
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in ops["ASC_DEFINES"].split()
    everything = " ".join(ops.values())
    assert "_GLIBCXX_USE_CXX11_ABI=0" not in everything
    assert "torch_npu/include" in ops["ASC_INCLUDES"]
    assert f"{home}/{ARCH}-linux/include" in ops["ASC_INCLUDES"]


def test_asc_gcc_toolchain_can_be_named(tmp_path: Path) -> None:
    home = _toolkit(tmp_path, "9.0.0", None, asc_config=True)
    result = _configure(tmp_path, "asc", home, extra=("-DASC_GCC_TOOLCHAIN=/opt/gcc-13",))
    assert result.returncode == 0, result.output
    flags = result.flags("add_ops")["ASC_FLAGS"].split()
    assert "--gcc-toolchain=/opt/gcc-13" in flags
    assert f"--gcc-toolchain={_gcc_prefix()}" not in flags
    # A modern torch has no TORCH_CXX_FLAGS: the ABI is the plan's, from torch._C.
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in result.flags("add_ops")["ASC_DEFINES"].split()


def test_asc_finds_asc_config_from_ascend_home_path_alone(tmp_path: Path) -> None:
    """Nothing but ASCEND_HOME_PATH points at the toolkit (no CMAKE_PREFIX_PATH entry)."""
    home = _toolkit(tmp_path, "9.0.0", None, asc_config=True)
    result = _configure(tmp_path, "asc", home)
    assert result.returncode == 0, result.output
    assert re.search(r"ASC_FLAGS = .*--npu-arch=dav-2201",
                     (result.build / "CMakeFiles" / "add_ops.dir" / "flags.make").read_text())
