"""An outside attack on the CPU-model verdict, kept as tests: every way it found to get a
wrong or host-only kernel called `passed`, to read files through the compiler, or to crash
`opbot verify` with a malformed package.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
from pathlib import Path
from typing import Any

import pytest

from runners.ascendc.cpu_verify import package_problems
from runners.ascendc.package import Manifest, PackageError, read_manifest
from runners.ascendc.source_rules import MAX_SOURCE_BYTES, source_problems
from tests.support import DATA, EXAMPLES, require_cpu_model, run_opbot

GOLDEN = DATA / "ascendc_golden"
GELU = GOLDEN / "legacy" / "gelu"
KERNEL = "gelu_kernel.cpp"
ON = {"OPBOT_ASCENDC_REAL_CHECKS": "1"}


@pytest.mark.parametrize(("source", "says"), [
    ('#include <cmath>\n', "includes 'cmath'"),
    ('#include "/root/.ssh/id_rsa"\n', "includes '/root/.ssh/id_rsa'"),
    ('#define SECRET "/etc/hostname"\n#include SECRET\n', "through a macro"),
    ('#include "../other/kernel.h"\n', "'../other/kernel.h'"),
    ('#include "missing.h"\n', "not a file of the package"),
    ("#if defined(ASCENDC_CPU_DEBUG)\n#endif\n", "asks whether it runs on the CPU model"),
    ("#ifdef __CCE_KT_TEST__\n#endif\n", "asks whether it runs on the CPU model"),
    ("__attribute__((constructor)) static void Leak() {}\n", "compiler attribute"),
    ('asm(".incbin \\"/etc/passwd\\"");\n', "inline assembly"),
    ("float f(float x) { return std::erf(x); }\n", "host's C++ library"),
    ("float f(float x) { return erff(x); }\n", "host's C library"),
    ("#if __has_include(\"/etc/passwd\")\n#endif\n", "probes for files"),
    # a second round: what a regex would miss unless the text is read as the compiler does
    ("#ifdef ASCENDC_CPU_\\\nDEBUG\n#endif\n", "continues a line with a backslash"),
    ("#if CAT(__CCE_KT, _TEST__)\n#endif\nint a = x ## y;\n", "pastes tokens"),
    ('const char* a = "/*";\n#if defined(ASCENDC_CPU_DEBUG)\n#endif\nconst char* b = "*/";\n',
     "asks whether it runs on the CPU model"),
    ("#if defined(__x86_64__) && !defined(__clang__)\n#endif\n", "compiler's own macro"),
    ('#line 1 "/etc/passwd"\nint a = ;\n', "uses #line"),
    ('%:include "/etc/passwd"\n', "uses a digraph"),
    ("#define SCALE 0.5f\n", "defines a macro"),
    ("const char* f = __FILE__;\n", "differs between builds"),
    ("int f() { return atexit(0); }\n", "host's C library"),
], ids=["cmath", "absolute", "macro-include", "outside", "missing", "cpu-debug-macro",
        "kt-test-macro", "constructor", "incbin", "std-erf", "libm-erff", "has-include",
        "line-splice", "token-paste", "comment-in-string", "compiler-macro", "line-directive",
        "digraph", "define", "file-macro", "atexit"])
def test_host_only_and_model_aware_sources_are_rejected(source: str, says: str) -> None:
    files = {KERNEL: '#include "kernel_operator.h"\n' + source, "gelu_tiling.h": "// ok\n"}
    problems = source_problems(files)
    assert problems, source
    assert {item.file for item in problems} == {KERNEL}
    assert min(item.line for item in problems) >= 2
    assert any(says in item.message for item in problems), [item.render() for item in problems]


def test_words_in_comments_and_api_calls_are_fine() -> None:
    files = {KERNEL: '#include "kernel_operator.h"\n#include "gelu_tiling.h"\n'
             "// std::exp and ASCENDC_CPU_DEBUG in a comment are fine\n"
             "/* asm, erff(x) */\nvoid F() { AscendC::Exp(y, x, 8); }\n",
             "gelu_tiling.h": "#include <cstdint>\n"}
    assert source_problems(files) == []
    assert source_problems({KERNEL: "x" * (MAX_SOURCE_BYTES + 1)})[0].message.startswith(
        "is larger than")


@pytest.mark.parametrize("package", sorted(GOLDEN.glob("*/*/ascendc")),
                         ids=lambda path: f"{path.parent.parent.name}-{path.parent.name}")
def test_the_golden_packages_have_no_problem(package: Path) -> None:
    assert package_problems(package, read_manifest(package)) is None


def _copy(tmp_path: Path, name: str = "gelu") -> Path:
    folder = tmp_path / name
    shutil.copytree(GELU, folder)
    return folder / "ascendc"


def _edit_manifest(package: Path, **changes: Any) -> None:
    path = package / "opbot.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_a_manifest_naming_another_kernel_or_namespace_is_refused(tmp_path: Path) -> None:
    package = _copy(tmp_path)
    shutil.copy(package / KERNEL, package / "alt_kernel.cpp")
    _edit_manifest(package, kernel="alt_kernel.cpp")
    problem = package_problems(package, read_manifest(package))
    assert problem is not None
    assert "the kernel checked must be the kernel shipped" in problem.message
    _edit_manifest(package, kernel=KERNEL, namespace="opbot_other")
    problem = package_problems(package, read_manifest(package))
    assert problem is not None
    assert "namespace" in problem.message


@pytest.mark.parametrize(("change", "says"), [
    ("kernel-link", "symbolic links"), ("header-name", "are named gelu_*.h"),
    ("cmake-source", "CMakeLists.txt builds gelu_kernel_npu.cpp"),
])
def test_a_package_opbot_cannot_check_is_refused(tmp_path: Path, change: str,
                                                 says: str) -> None:
    package = _copy(tmp_path)
    if change == "kernel-link":
        (package / KERNEL).rename(package / "body.inc")
        (package / KERNEL).symlink_to("body.inc")
    elif change == "header-name":  # would stand in for the real API's header
        (package / "kernel_operator.h").write_text("// mine\n", encoding="utf-8")
    else:
        cmake = package / "CMakeLists.txt"
        cmake.write_text(cmake.read_text(encoding="utf-8").replace(
            "gelu_kernel.cpp)", "gelu_kernel_npu.cpp)", 1), encoding="utf-8")
    problem = package_problems(package, read_manifest(package))
    assert problem is not None
    assert problem.check == "load"
    assert says in problem.message


def test_only_the_checked_files_reach_the_compiler(tmp_path: Path) -> None:
    from runners.ascendc.cpu_verify import checked_copy

    package = _copy(tmp_path)
    (package / "cstring").write_text("#error shadowed\n", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    copy = checked_copy(package, read_manifest(package), work)
    assert sorted(path.name for path in copy.iterdir()) == [
        "gelu_kernel.cpp", "gelu_tiling.h", "opbot.json"]
    assert (copy / KERNEL).read_text(encoding="utf-8") == (package / KERNEL).read_text(
        encoding="utf-8")


@pytest.mark.parametrize("data", [
    [1, 2], {"inputs": None}, {"entries": [1, 2]}, {"outputs": "many"}, {"entries": None},
], ids=["list", "inputs-null", "entries-list", "outputs-text", "entries-null"])
def test_a_malformed_manifest_is_a_package_error(data: Any) -> None:
    base = json.loads((GELU / "ascendc" / "opbot.json").read_text(encoding="utf-8"))
    document = data if isinstance(data, list) else {**base, **data}
    with pytest.raises(PackageError, match=r"opbot\.json"):
        Manifest.from_json(document)
    with pytest.raises(PackageError, match="'entries' is missing"):
        Manifest.from_json({key: value for key, value in base.items() if key != "entries"})


def test_the_sandbox_masks_the_accounts_home_when_home_is_unset(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from runners import sandbox

    monkeypatch.delenv("HOME", raising=False)
    home = pwd.getpwuid(os.getuid()).pw_dir
    assert home in sandbox._homes() or home == "/"
    monkeypatch.setenv("HOME", "/nonexistent-home")
    assert sandbox._homes()[0] == "/nonexistent-home"
    assert home in sandbox._homes() or home == "/"


# -- end to end, on the CPU model -----------------------------------------------------------

def _verify(package: Path, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    run = run_opbot("verify", str(EXAMPLES / "gelu" / "op.yaml"), str(package.parent),
                    "--backend", "ascendc", "--json", env={**ON, **(env or {})})
    assert "Traceback" not in run.stdout + run.stderr
    return run.code, (json.loads(run.stdout) if run.stdout.strip() else {})


def test_a_twin_that_computes_the_outputs_itself_changes_nothing(tmp_path: Path) -> None:
    """The package's cpu_twin.cpp is anyone's to edit: opbot builds its own."""
    require_cpu_model()
    package = _copy(tmp_path)
    kernel = package / KERNEL
    kernel.write_text(kernel.read_text(encoding="utf-8").replace(
        "AscendC::Muls(y0, y0, 0.5f, count);", "AscendC::Muls(y0, y0, 0.0f, count);", 1),
        encoding="utf-8")
    twin = package / "cpu_twin.cpp"
    text = twin.read_text(encoding="utf-8")
    marker = "int main(int argc, char** argv)\n{"
    assert marker in text
    twin.write_text(text.replace(marker, marker + "\n    return 0;", 1), encoding="utf-8")
    code, result = _verify(package)
    assert code == 1
    assert result["status"] == "failed"
    assert result["reasons"][0]["check"] == "values"


def test_a_kernel_that_serves_only_eight_blocks_fails(tmp_path: Path) -> None:
    """The CPU model launches as many blocks as the SoC has vector cores (40 on 910B3)."""
    require_cpu_model()
    package = _copy(tmp_path)
    kernel = package / KERNEL
    text = kernel.read_text(encoding="utf-8")
    loop = "        for (uint32_t tile = 0; tile < tileNum_; ++tile) {"
    assert loop in text
    kernel.write_text(text.replace(loop, "        if (AscendC::GetBlockIdx() >= 8) { return; }"
                                   "\n" + loop, 1), encoding="utf-8")
    code, result = _verify(package)
    assert code == 1
    assert result["reasons"][0]["check"] == "values"


def test_unusable_real_sources_are_this_machines_fault(tmp_path: Path) -> None:
    """Corrupt archives: exit 2 "cannot run here", never a failed package."""
    require_cpu_model()
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "asc-devkit-82b89a1.tar.xz").write_bytes(b"\xfd7zXZ\x00 truncated")
    (sources / "asc-tools-2113e48.tar.xz").write_bytes(os.urandom(64))
    code, _ = _verify(_copy(tmp_path), {"OPBOT_ASCEND_REAL_API": str(sources),
                                        "OPBOT_CACHE_DIR": str(tmp_path / "cache")})
    assert code == 2
