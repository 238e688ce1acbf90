"""A second outside attack on the CPU model, kept as tests: a package header that declared a
better-matching overload of the twin's file helpers took over opbot's I/O (and could rewrite
the outputs), and host library calls passed the source rules in other spellings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from runners.ascendc.source_rules import source_problems
from tests.support import DATA, EXAMPLES, require_cpu_model, run_opbot

GELU = DATA / "ascendc_golden" / "legacy" / "gelu"
KERNEL = "gelu_kernel.cpp"
HEADER = "gelu_tiling.h"


@pytest.mark.parametrize("line", [
    "FILE* f = ::fopen(\"/etc/passwd\", \"r\");",
    "auto open_it = &fopen;",
    "(fopen)(\"/etc/passwd\", \"r\");",
    "printf(\"%d\", 1);",
    "char b[8]; fgets(b, 8, stdin);",
    "float r = ::sqrtf(2.0f);",
    "auto g = &::expf;",
    "::fprintf(stderr, \"x\");",
])
def test_host_library_calls_in_every_spelling_are_refused(line: str) -> None:
    files = {KERNEL: f'#include "kernel_operator.h"\nvoid F() {{ {line} }}\n'}
    problems = source_problems(files)
    assert any("host's C library" in item.message for item in problems), line


def test_names_that_only_look_like_library_calls_are_fine() -> None:
    files = {KERNEL: '#include "kernel_operator.h"\n'
             "void F() { uint32_t readCount = 0; queue.read(readCount); "
             "AscendC::Exp(y, x, 8); this->write(1); uint32_t opened = readCount; }\n"}
    assert source_problems(files) == []


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(GELU, tmp_path / "gelu")
    return tmp_path / "gelu" / "ascendc"


def _verify(package: Path) -> tuple[int, dict[str, Any]]:
    run = run_opbot("verify", str(EXAMPLES / "gelu" / "op.yaml"), str(package.parent),
                    "--backend", "ascendc", "--json",
                    env={"OPBOT_ASCENDC_REAL_CHECKS": "1"})
    assert "Traceback" not in run.stdout + run.stderr
    return run.code, (json.loads(run.stdout) if run.stdout.strip() else {})


def _add_to_header(package: Path, code: str) -> None:
    header = package / HEADER
    text = header.read_text(encoding="utf-8")
    guard_end = text.rindex("#endif")
    header.write_text(text[:guard_end] + code + "\n" + text[guard_end:], encoding="utf-8")


def test_a_header_overload_of_the_twins_io_cannot_be_chosen(tmp_path: Path) -> None:
    """An exact-name overload makes the twin fail to build; it is never called."""
    require_cpu_model()
    package = _copy(tmp_path)
    _add_to_header(package, "inline bool WriteFile(char*, unsigned char*, unsigned long) "
                            "{ return true; }")
    code, result = _verify(package)
    assert code == 1, result
    assert result["status"] == "failed"


def test_an_overload_of_the_helpers_name_changes_nothing(tmp_path: Path) -> None:
    """A better match under the helpers' own names is not what the twin's pointers hold."""
    require_cpu_model()
    package = _copy(tmp_path)
    _add_to_header(package, "inline bool WriteFileImpl(char*, unsigned char*, unsigned long) "
                            "{ return true; }\ninline bool ReadFileImpl(char*, unsigned char*, "
                            "unsigned long) { return true; }")
    code, result = _verify(package)
    assert code == 0, result
    assert result["status"] == "passed"
