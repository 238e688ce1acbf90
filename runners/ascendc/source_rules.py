"""What a kernel may contain before g++ or the CPU model touches it.

The real-header check and the CPU model compile the kernel on the host, where far more is
possible than on an AI Core: host headers (whose text a compiler error would quote back,
secrets included), the C math library, code that asks whether it runs on the CPU model and
behaves differently there, constructors and inline assembly that run or embed anything.
None of that exists on an NPU, so a kernel using it is rejected here, by name, instead of
passing on the CPU and failing (or worse) on the device.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

MAX_SOURCE_BYTES = 1024 * 1024  # per file: a kernel is a few hundred lines
# What a kernel may include: the Ascend C API and the package's own headers by bare name.
_API_HEADERS = frozenset({"kernel_operator.h", "kernel_tiling/kernel_tiling.h",
                          "lib/matmul_intf.h"})
_STD_HEADERS = frozenset({"cstdint", "cstddef", "stdint.h", "stddef.h", "type_traits",
                          "limits", "cfloat", "climits"})
_INCLUDE = re.compile(r"^\s*#\s*(?:include|include_next|import)\b(?P<rest>.*)$", re.MULTILINE)
_QUOTED = re.compile(r'^\s*(?:"(?P<q>[^"]+)"|<(?P<a>[^>]+)>)\s*(?://.*|/\*.*)?$')
_LOCAL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\.(?:h|hpp|inc|asc)")
# Host-only or model-aware tokens: (pattern, why).
_FORBIDDEN = (
    (re.compile(r"\b(?:ASCENDC_CPU_DEBUG|__CCE_KT_TEST__|OPBOT_CPU_MODEL|ASCENDC_DEBUG)\b"),
     "asks whether it runs on the CPU model (a kernel must compute the same everywhere)"),
    (re.compile(r"\b(?:__attribute__|__declspec)\b"), "uses a compiler attribute"),
    (re.compile(r"\b__has_include(?:_next)?\b"), "probes for files on the host"),
    (re.compile(r"\b(?:asm|__asm__|__asm)\b|\.incbin\b"), "uses inline assembly"),
    (re.compile(r"\bstd\s*::\s*(?:exp|expf|log|logf|log1p|erf|erff|erfc|sqrt|sqrtf|pow|tanh|"
                r"sinh|cosh|sin|cos|tan|atan|fabs|floor|ceil|round|fmod|fma|"
                r"printf|fopen|getenv|system|thread|ifstream|ofstream)\b"),
     "calls the host's C++ library, which an AI Core does not have"),
    (re.compile(r"(?<![\w:.>])(?:expf?|logf?|log1pf?|erff?|erfcf?|sqrtf?|powf?|tanhf?|sinf?|"
                r"cosf?|fabsf?|floorf?|ceilf?|fopen|fread|getenv|system|popen|dlopen|"
                r"mmap|syscall|fork|execve?)\s*\("),
     "calls the host's C library, which an AI Core does not have"),
    (re.compile(r"\b_Pragma\b|#\s*pragma\s+(?:GCC\s+)?(?:poison|system_header|push_macro)"),
     "uses a pragma that changes how the check sees the code"),
)


@dataclass(frozen=True)
class SourceProblem:
    file: str
    line: int
    message: str

    def render(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _strip_comments(text: str) -> str:
    """Comments blanked (newlines kept, so lines still count): a word in a comment is fine."""
    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))
    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, text, flags=re.DOTALL)


def _include_problem(rest: str, local: frozenset[str]) -> str | None:
    match = _QUOTED.match(rest)
    if match is None:
        return ("includes through a macro or in an unusual form: write #include "
                "\"kernel_operator.h\" or a header of the package by its name")
    name = match["q"] or match["a"] or ""
    if name in _API_HEADERS or name in _STD_HEADERS or name in local:
        return None
    if match["q"] and _LOCAL.fullmatch(name):
        return f"includes \"{name}\", which is not a file of the package"
    return (f"includes {name!r}: a kernel may include only the Ascend C API "
            "(kernel_operator.h) and the package's own headers by name")


def source_problems(files: Mapping[str, str]) -> list[SourceProblem]:
    """Problems in a package's C++ sources (name -> text, names relative to ascendc/)."""
    local = frozenset(name.rsplit("/", 1)[-1] for name in files)
    problems: list[SourceProblem] = []
    for name, text in sorted(files.items()):
        if len(text.encode("utf-8", errors="replace")) > MAX_SOURCE_BYTES:
            problems.append(SourceProblem(name, 1, f"is larger than {MAX_SOURCE_BYTES} bytes"))
            continue
        code = _strip_comments(text)
        for match in _INCLUDE.finditer(code):
            why = _include_problem(match["rest"], local)
            if why is not None:
                problems.append(SourceProblem(name, _line_of(code, match.start()), why))
        for pattern, why in _FORBIDDEN:
            for match in pattern.finditer(code):
                problems.append(SourceProblem(
                    name, _line_of(code, match.start()), f"`{match.group(0).strip()}` {why}"))
    return problems
