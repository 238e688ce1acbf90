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
_MATH = (r"(?:expf?|logf?|log1pf?|erff?|erfcf?|sqrtf?|powf?|tanhf?|sinf?|cosf?|fabsf?|floorf?|"
         r"ceilf?)")
_HOST = (r"(?:fopen|fread|fwrite|fprintf|printf|puts|fputs|fgets|fscanf|scanf|fclose|fflush|"
         r"getenv|system|popen|dlopen|dlsym|mmap|syscall|fork|execve?|atexit|at_quick_exit|"
         r"open|read|write|readlink|memfd_create|signal|sigaction|unlink|remove|rename|exit|"
         r"_exit|stderr|stdout|stdin)")
_FORBIDDEN = (
    (re.compile(r"\b(?:ASCENDC_CPU_DEBUG|__CCE_KT_TEST__|OPBOT_CPU_MODEL|ASCENDC_DEBUG)\b"),
     "asks whether it runs on the CPU model (a kernel must compute the same everywhere)"),
    (re.compile(r"\b(?:__attribute__|__declspec)\b"), "uses a compiler attribute"),
    (re.compile(r"\b__has_include(?:_next)?\b"), "probes for files on the host"),
    (re.compile(r"\b(?:asm|__asm__|__asm)\b|\.incbin\b"), "uses inline assembly"),
    (re.compile(r"\bstd\s*::\s*(?:exp|expf|log|logf|log1p|erf|erff|erfc|sqrt|sqrtf|pow|tanh|"
                r"sinh|cosh|sin|cos|tan|atan|fabs|floor|ceil|round|fmod|fma|"
                r"printf|fopen|fwrite|getenv|system|thread|ifstream|ofstream|atexit|"
                r"filesystem|ios|cout|cerr)\b"),
     "calls the host's C++ library, which an AI Core does not have"),
    # Called, taken by address (`&fopen`), named globally (`::expf`) or in parentheses
    # (`(fopen)(...)`): every spelling that reaches the host's C library.
    (re.compile(rf"(?<![\w:.>])(?:{_MATH}|{_HOST})\s*\(|(?<![\w.>])(?:&|::)\s*(?:{_MATH}|{_HOST})\b"
                rf"|(?<![\w:.>])(?:{_HOST})\s*\)"),
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
    """Comments and the insides of string and character literals blanked (offsets and
    newlines kept): a forbidden word in a comment or a string is fine, and a "/*" inside a
    string cannot hide the code after it."""
    out = list(text)
    i, n = 0, len(text)

    def blank(start: int, end: int) -> None:
        for k in range(start, min(end, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif c == '"' and i > 0 and text[i - 1] == "R" and (i < 2 or not (
                text[i - 2].isalnum() or text[i - 2] == "_") or text[i - 2] in "8uUL"):
            close = text.find("(", i)
            delimiter = text[i + 1:close] if close >= 0 else ""
            end = text.find(f"){delimiter}\"", close) if close >= 0 else -1
            end = n if end < 0 else end + len(delimiter) + 2
            blank(i + 1, end - 1)
            i = end
        elif c in "\"'":
            k = i + 1
            while k < n and text[k] != c and text[k] != "\n":
                k += 2 if text[k] == "\\" else 1
            blank(i + 1, k)
            i = k + 1
        else:
            i += 1
    return "".join(out)


# Tokens that let text the rules read differ from what the compiler sees, or that make the
# compiler quote other files: rejected wherever they stand in code.
_OBFUSCATION = (
    (re.compile(r"\\\r?\n"), "continues a line with a backslash (write it on one line)"),
    (re.compile(r"\?\?[=/'()!<>\-]"), "uses a trigraph"),
    (re.compile(r"%:|<%|%>"), "uses a digraph"),
    (re.compile(r"##"), "pastes tokens in a macro"),
    (re.compile(r"^\s*#\s*line\b", re.MULTILINE), "uses #line"),
    (re.compile(r"^\s*#\s*(?:define|undef)\b", re.MULTILINE),
     "defines a macro (use constexpr; only the tiling header's include guard is a macro)"),
)
_GUARD = re.compile(r"^\s*#\s*ifndef\s+(?P<guard>\w+)\s*\n\s*#\s*define\s+(?P=guard)\s*$",
                    re.MULTILINE)
_CONDITIONAL = re.compile(r"^\s*#\s*(?:if|ifdef|ifndef|elif)\b(?P<rest>[^\n]*)", re.MULTILINE)
_RESERVED = re.compile(r"\b_[_A-Z]\w*")
# Predefined macros that hold the same value on the device as in the CPU-mode check.
_SAME_ON_DEVICE = frozenset({"__NPU_ARCH__", "__CCE_AICORE__", "__DAV_C220__",
                             "__DAV_C220_VEC__", "__DAV_C220_CUBE__", "__DAV_VEC__",
                             "__DAV_CUBE__"})
_BUILTINS = re.compile(r"\b(?:__FILE__|__DATE__|__TIME__|__TIMESTAMP__|__BASE_FILE__|"
                       r"__COUNTER__)\b")


def _obfuscation_problems(name: str, code: str) -> list[SourceProblem]:
    problems: list[SourceProblem] = []
    guard = _GUARD.search(code)
    for pattern, why in _OBFUSCATION:
        for match in pattern.finditer(code):
            if guard is not None and match.start() >= guard.start() and \
                    match.start() < guard.end() and "defines a macro" in why:
                continue  # the include guard
            problems.append(SourceProblem(name, _line_of(code, match.start()), why))
    for match in _CONDITIONAL.finditer(code):
        for word in _RESERVED.findall(match["rest"]):
            if word not in _SAME_ON_DEVICE and word != "__has_include":
                problems.append(SourceProblem(
                    name, _line_of(code, match.start()),
                    f"tests the compiler's own macro `{word}`, which differs between the "
                    "CPU-mode check and the device compiler"))
    for match in _BUILTINS.finditer(code):
        problems.append(SourceProblem(name, _line_of(code, match.start()),
                                      f"`{match.group(0)}` differs between builds"))
    return problems


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
        problems += _obfuscation_problems(name, code)
        for match in _INCLUDE.finditer(code):
            # The include's argument as written (the blanked copy has no string contents).
            rest = text[match.start("rest"):match.end("rest")]
            why = _include_problem(rest, local)
            if why is not None:
                problems.append(SourceProblem(name, _line_of(code, match.start()), why))
        for pattern, why in _FORBIDDEN:
            for match in pattern.finditer(code):
                problems.append(SourceProblem(
                    name, _line_of(code, match.start()), f"`{match.group(0).strip()}` {why}"))
    return problems
