"""A lint for Ascend C sources, run on the text (no compiler needed).

It catches, before a runner spends minutes on a build, the mistakes the toolchain notes
list as the ones that break kernels or break them on the next CANN release:

- queue-balance / queue-stage: every TQue tensor is AllocTensor'd, EnQue'd, DeQue'd and
  FreeTensor'd, along the CopyIn -> Compute -> CopyOut pattern;
- header: only documented headers (kernel_operator.h in kernels; platform/tiling headers
  on the host); `inner_*` and impl headers disappear between releases;
- extern-c: one plain `extern "C"` entry per dtype; templated entries are mangled
  differently since CANN 8.2.RC1;
- datacopy-align: plain DataCopy needs 32-byte multiples; tails need DataCopyPad;
- core-count: core counts come from GetCoreNumAiv() at run time, never literals;
- qualifiers / launch-arg: `__global__ __aicore__` with GM_ADDR (legacy) versus
  `__global__ __vector__|__aicore__` with `__gm__` pointers (ASC), and the second `<<<>>>`
  argument (l2ctrl nullptr versus dynUBufSize 0);
- cmake: the lines each generation's CMakeLists.txt cannot do without, in order.

Findings are typed, with line numbers, and render as feedback text for the agent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["error", "warning"]
Generation = Literal["legacy", "asc"]

RULES: tuple[str, ...] = (
    "queue-balance", "queue-stage", "header", "extern-c", "datacopy-align", "core-count",
    "qualifiers", "launch-arg", "cmake",
)


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    line: int
    message: str
    file: str = ""

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.file else f"line {self.line}"
        return f"{where}: {self.severity} [{self.rule}] {self.message}"


def feedback(findings: Sequence[Finding]) -> str:
    """Findings as text for the agent: errors first, then warnings."""
    if not findings:
        return "lint: no findings"
    ordered = sorted(findings, key=lambda item: (item.severity != "error", item.file,
                                                 item.line))
    return "\n".join(item.render() for item in ordered)


# --------------------------------------------------------------------------- source text


def _blank(text: str, *, keep_strings: bool) -> str:
    """Comments (and, unless kept, string/char literal contents) replaced by spaces, so
    regexes see only code while offsets and line numbers stay those of the original."""
    out = list(text)
    index, size = 0, len(text)
    while index < size:
        char = text[index]
        pair = text[index:index + 2]
        if pair in ("//", "/*"):
            end = text.find("\n" if pair == "//" else "*/", index + 2)
            end = size if end < 0 else (end if pair == "//" else end + 2)
            for position in range(index, end):
                if out[position] != "\n":
                    out[position] = " "
            index = end
            continue
        if char in "\"'":
            end = index + 1
            while end < size and text[end] != char and text[end] != "\n":
                end += 2 if text[end] == "\\" else 1
            if not keep_strings:
                for position in range(index + 1, min(end, size)):
                    out[position] = " "
            index = end + 1
            continue
        index += 1
    return "".join(out)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _matching(text: str, open_at: int, pair: str = "()") -> int:
    """The offset of the bracket closing the one at `open_at` (or len(text))."""
    depth = 0
    for index in range(open_at, len(text)):
        if text[index] == pair[0]:
            depth += 1
        elif text[index] == pair[1]:
            depth -= 1
            if depth == 0:
                return index
    return len(text)


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of an argument list's inside."""
    args: list[str] = []
    depth, start = 0, 0
    for index, char in enumerate(text):
        if char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        elif char == "," and depth == 0:
            args.append(text[start:index].strip())
            start = index + 1
    tail = text[start:].strip()
    if tail:
        args.append(tail)
    return args


@dataclass(frozen=True)
class _Function:
    name: str
    start: int
    end: int


_DEFINITION = re.compile(r"\b(CopyIn|Compute|CopyOut)\s*\([^;{)]*\)\s*(?:const\s*)?\{")


def _stage_functions(code: str) -> list[_Function]:
    functions: list[_Function] = []
    for match in _DEFINITION.finditer(code):
        open_at = match.end() - 1
        functions.append(_Function(match.group(1), open_at, _matching(code, open_at, "{}")))
    return functions


def _stage_at(functions: Sequence[_Function], offset: int) -> str | None:
    for function in functions:
        if function.start <= offset <= function.end:
            return function.name
    return None


# --------------------------------------------------------------------------- kernel rules


_QUEUE_DECL = re.compile(
    r"\bTQue\s*<\s*(?:AscendC::)?(?:QuePosition|TPosition)::(\w+)\s*,[^;]*?>\s*([\w\s,]+);")
_QUEUE_CALL = re.compile(r"\b(\w+)\s*\.\s*(AllocTensor|EnQue|DeQue|FreeTensor)\b")
# Where each queue operation belongs in CopyIn -> Compute -> CopyOut, by queue position.
_EXPECTED_STAGE = {
    ("VECIN", "AllocTensor"): "CopyIn", ("VECIN", "EnQue"): "CopyIn",
    ("VECIN", "DeQue"): "Compute", ("VECIN", "FreeTensor"): "Compute",
    ("VECOUT", "AllocTensor"): "Compute", ("VECOUT", "EnQue"): "Compute",
    ("VECOUT", "DeQue"): "CopyOut", ("VECOUT", "FreeTensor"): "CopyOut",
}


def _queues(code: str) -> dict[str, tuple[str, int]]:
    """queue name -> (position, declaration offset)."""
    queues: dict[str, tuple[str, int]] = {}
    for match in _QUEUE_DECL.finditer(code):
        for name in match.group(2).split(","):
            if name.strip():
                queues[name.strip()] = (match.group(1), match.start())
    return queues


def _queue_findings(code: str) -> Iterator[Finding]:
    queues = _queues(code)
    calls: dict[str, dict[str, list[int]]] = {name: {} for name in queues}
    for match in _QUEUE_CALL.finditer(code):
        if match.group(1) in calls:
            calls[match.group(1)].setdefault(match.group(2), []).append(match.start())
    functions = _stage_functions(code)
    for name, (position, declared) in queues.items():
        counts = {op: len(calls[name].get(op, [])) for op in
                  ("AllocTensor", "EnQue", "DeQue", "FreeTensor")}
        yield from _balance(name, counts, _line(code, declared))
        if functions:
            yield from _stages(code, name, position, calls[name], functions)


def _balance(name: str, counts: Mapping[str, int], line: int) -> Iterator[Finding]:
    if not any(counts.values()):
        yield Finding("queue-balance", "warning", line, f"queue {name} is declared but never "
                      "used: its InitBuffer still takes UB")
        return
    pairs = (("AllocTensor", "FreeTensor"), ("EnQue", "DeQue"), ("AllocTensor", "EnQue"))
    for first, second in pairs:
        if counts[first] != counts[second]:
            yield Finding("queue-balance", "error", line,
                          f"queue {name}: {counts[first]} {first} but {counts[second]} "
                          f"{second}; every tile must be AllocTensor'd, EnQue'd, DeQue'd "
                          "and FreeTensor'd once")


def _stages(code: str, name: str, position: str, calls: Mapping[str, list[int]],
            functions: Sequence[_Function]) -> Iterator[Finding]:
    for op, offsets in calls.items():
        expected = _EXPECTED_STAGE.get((position, op))
        for offset in offsets:
            stage = _stage_at(functions, offset)
            if expected is not None and stage is not None and stage != expected:
                yield Finding("queue-stage", "warning", _line(code, offset),
                              f"{name}.{op} ({position}) in {stage}: the CopyIn -> Compute "
                              f"-> CopyOut pattern does it in {expected}")


_GLOBAL = re.compile(r"\b__global__\b")
_TEMPLATE_BEFORE = re.compile(r"template\s*<[^;{}]*>\s*(?:extern\s*\"C\"\s*)?$")
_EXTERN_BEFORE = re.compile(r"extern\s*\"C\"\s*(?:template\s*<[^;{}]*>\s*)?$")


@dataclass(frozen=True)
class _Entry:
    name: str
    offset: int
    qualifiers: tuple[str, ...]
    params: tuple[str, ...]
    extern_c: bool
    templated: bool


def _entries(code: str, strings: str) -> list[_Entry]:
    """Every `__global__` function: qualifiers, parameters, linkage."""
    entries: list[_Entry] = []
    for match in _GLOBAL.finditer(code):
        head = re.match(r"\s*((?:__\w+__\s+)*)(?:void|int\w*)\s+(\w+)\s*\(", code[match.end():])
        if head is None:
            continue
        open_at = match.end() + head.end() - 1
        params = tuple(_split_args(code[open_at + 1:_matching(code, open_at)]))
        before = strings[max(0, match.start() - 200):match.start()]
        entries.append(_Entry(
            name=head.group(2), offset=match.start(),
            qualifiers=tuple(head.group(1).split()), params=params,
            extern_c=_EXTERN_BEFORE.search(before) is not None,
            templated=_TEMPLATE_BEFORE.search(before) is not None))
    return entries


def _entry_findings(code: str, entries: Sequence[_Entry],
                    expected: Iterable[str]) -> Iterator[Finding]:
    names = {entry.name for entry in entries}
    for entry in entries:
        line = _line(code, entry.offset)
        if entry.templated:
            yield Finding("extern-c", "error", line, f"kernel {entry.name} is a template: "
                          "CANN 8.2.RC1 changed how templated kernel names are mangled; write "
                          "one extern \"C\" entry per dtype around a templated class")
        elif not entry.extern_c:
            yield Finding("extern-c", "error", line, f"kernel {entry.name} is not extern \"C\": "
                          "its mangled name changes with the compiler; declare it "
                          "extern \"C\" __global__ ...")
    for name in expected:
        if name not in names:
            yield Finding("extern-c", "error", 1, f"no extern \"C\" __global__ entry named "
                          f"{name} (one per dtype the binding launches)")


_POINTER = re.compile(r"\*|\bGM_ADDR\b")


def _qualifier_findings(code: str, entries: Sequence[_Entry],
                        generation: Generation) -> Iterator[Finding]:
    for entry in entries:
        line = _line(code, entry.offset)
        qualifiers = set(entry.qualifiers)
        if generation == "legacy":
            if "__aicore__" not in qualifiers:
                yield Finding("qualifiers", "error", line, f"{entry.name}: legacy kernels are "
                              "declared `extern \"C\" __global__ __aicore__`")
            asc_only = sorted(qualifiers & {"__vector__", "__cube__", "__mix__"})
            if asc_only:
                yield Finding("qualifiers", "error", line, f"{entry.name}: {asc_only[0]} is "
                              "the ASC (CANN 9.x) spelling; the legacy toolchain uses "
                              "__aicore__")
        elif not qualifiers & {"__vector__", "__cube__", "__mix__", "__aicore__"}:
            yield Finding("qualifiers", "error", line, f"{entry.name}: ASC kernels are "
                          "`__global__ __vector__` (or __cube__/__mix__/__aicore__)")
        yield from _param_findings(entry, line, generation)


def _param_findings(entry: _Entry, line: int, generation: Generation) -> Iterator[Finding]:
    pointers = [param for param in entry.params if _POINTER.search(param)]
    legacy_spelled = [param for param in pointers if "GM_ADDR" in param]
    if generation == "asc" and legacy_spelled:
        yield Finding("qualifiers", "warning", line, f"{entry.name}: GM_ADDR "
                      f"({', '.join(legacy_spelled)}) is the legacy spelling; ASC kernels take "
                      "`__gm__ uint8_t*` pointers")
    for param in pointers:
        if "GM_ADDR" not in param and "__gm__" not in param:
            yield Finding("qualifiers", "error", line, f"{entry.name}: `{param}` is a pointer "
                          "without __gm__: kernel arguments point to global memory "
                          f"({'GM_ADDR' if generation == 'legacy' else '__gm__ uint8_t*'})")


_DATA_COPY = re.compile(r"\bDataCopy\s*\(")
_CONSTANT = re.compile(r"\b(?:constexpr|const)\s+[\w:]+\s+(\w+)\s*=\s*(\d+)\s*;")
ALIGNED_ELEMENTS = 16  # 32 bytes of float16; float32 needs 8, so 16 is safe for both


def _datacopy_findings(code: str) -> Iterator[Finding]:
    constants = {match.group(1): int(match.group(2)) for match in _CONSTANT.finditer(code)}
    for match in _DATA_COPY.finditer(code):
        open_at = match.end() - 1
        args = _split_args(code[open_at + 1:_matching(code, open_at)])
        if len(args) != 3:
            continue  # the DataCopyParams form counts in 32-byte blocks already
        count = args[2].strip()
        value = int(count) if count.isdigit() else constants.get(count)
        if value is not None and value % ALIGNED_ELEMENTS == 0:
            continue
        yield Finding("datacopy-align", "warning", _line(code, match.start()),
                      f"DataCopy(..., {count}) moves whole 32-byte blocks only: a length "
                      "that is no 32-byte multiple (odd sizes, the last tile) needs "
                      "DataCopyPad(dst, src, DataCopyExtParams{1, bytes, 0, 0, 0}, ...)")


# --------------------------------------------------------------------------- host + shared


_CORE_LITERALS = (
    (re.compile(r"<<<\s*(\d+)\s*,"), "<<<numBlocks"),
    (re.compile(r"\bACLRT_LAUNCH_KERNEL\s*\(\s*\w+\s*\)\s*\(\s*(\d+)\s*,"),
     "ACLRT_LAUNCH_KERNEL blockDim"),
    (re.compile(r"\bICPU_RUN_KF\s*\(\s*\w+\s*,\s*(\d+)\s*,"), "ICPU_RUN_KF blockDim"),
    (re.compile(r"\bSetBlockDim\s*\(\s*(\d+)\s*\)"), "SetBlockDim"),
    (re.compile(r"\b(\w*(?:block_?dim|core_?num|num_?cores|num_?blocks|block_?num)\w*)"
                r"\s*(?:=|\{)\s*(\d+)\s*[;}]", re.IGNORECASE), ""),
)


def _core_findings(code: str) -> Iterator[Finding]:
    for pattern, label in _CORE_LITERALS:
        for match in pattern.finditer(code):
            name = label or match.group(1)
            value = int(match.group(match.lastindex or 1))
            if value <= 1 or re.search(r"max|min|limit", name, re.IGNORECASE):
                continue  # one block is no core count; limits are not counts either
            yield Finding("core-count", "error", _line(code, match.start()),
                          f"hard-coded core count {value} in {name}: read it at run time "
                          "(PlatformAscendCManager::GetInstance()->GetCoreNumAiv()) so the "
                          "code fits every SoC")


_INCLUDE = re.compile(r"^\s*#\s*include\s*([<\"])([^>\"]+)[>\"]", re.MULTILINE)
_INTERNAL = re.compile(r"(?:^|/)(?:inner_|impl/|interface/)|_intf\.h$|_impl\.h$")
_KERNEL_HEADERS = {"kernel_operator.h", "cpu_debug_launch.h", "tikicpulib.h"}
_HOST_PREFIXES = ("ATen/", "torch/", "c10/", "torch_npu/", "pybind11/", "acl/",
                  "tiling/platform/platform_ascendc.h", "tiling/tiling_api.h",
                  "register/tilingdata_base.h", "register/op_def_registry.h", "aclrtlaunch_",
                  "aclnn/", "graph/")
_ASCEND_LOOKING = re.compile(r"kernel_|ascend|tikcpp|tiling/|register/|acl", re.IGNORECASE)


def _header_findings(text: str, kind: Literal["kernel", "host"]) -> Iterator[Finding]:
    for match in _INCLUDE.finditer(text):
        header = match.group(2)
        line = _line(text, match.start())
        if _INTERNAL.search(header):
            yield Finding("header", "error", line, f"internal header {header}: internal "
                          "headers move or vanish between CANN releases (`inner_*` broke in "
                          "9.0); include only documented ones (kernel_operator.h)")
            continue
        local = match.group(1) == '"'
        if _allowed_header(header, local, kind):
            continue
        yield Finding("header", "warning" if local else "error", line,
                      f"undocumented header {header}: "
                      + ("kernels include kernel_operator.h (and their own headers)"
                         if kind == "kernel" else "host code includes the platform/tiling "
                         "headers, torch and torch_npu, acl"))


def _allowed_header(header: str, local: bool, kind: Literal["kernel", "host"]) -> bool:
    if header in _KERNEL_HEADERS:
        return True
    if local and (header.endswith(("_tiling.h", "_kernel.asc", "_kernel.cpp"))
                  or not _ASCEND_LOOKING.search(header)):
        return True
    if not local and "/" not in header and not _ASCEND_LOOKING.search(header):
        return True  # the C++ standard library
    return kind == "host" and header.startswith(_HOST_PREFIXES)


_LAUNCH = re.compile(r"<<<\s*([^,>]+?)\s*,\s*([^,>]+?)\s*,\s*([^>]+?)\s*>>>")
_ACLRT_LAUNCH = re.compile(r"\bACLRT_LAUNCH_KERNEL\s*\(")


def _launch_findings(code: str, generation: Generation) -> Iterator[Finding]:
    for match in _LAUNCH.finditer(code):
        second = match.group(2)
        line = _line(code, match.start())
        if generation == "asc" and second in ("nullptr", "NULL"):
            yield Finding("launch-arg", "error", line, "the second <<<>>> argument is "
                          "dynUBufSize on CANN 9.x: pass 0, not nullptr (the legacy l2ctrl)")
        elif generation == "legacy" and second == "0":
            yield Finding("launch-arg", "warning", line, "the second <<<>>> argument is "
                          "l2ctrl on the legacy toolchain: pass nullptr")
    if generation == "asc":
        for match in _ACLRT_LAUNCH.finditer(code):
            yield Finding("launch-arg", "error", _line(code, match.start()),
                          "ACLRT_LAUNCH_KERNEL needs the aclrtlaunch_* headers of "
                          "ascendc_library, which the ASC toolchain (CANN 9.x) does not "
                          "generate: launch with kernel<<<numBlocks, 0, stream>>>(...)")


# --------------------------------------------------------------------------- CMake


@dataclass(frozen=True)
class _Required:
    pattern: re.Pattern[str]
    what: str


_CMAKE_REQUIRED: dict[str, tuple[_Required, ...]] = {
    "legacy": (
        _Required(re.compile(r"ASCEND_CANN_PACKAGE_PATH"), "ASCEND_CANN_PACKAGE_PATH"),
        _Required(re.compile(r"\bSOC_VERSION\b"), "SOC_VERSION"),
        _Required(re.compile(r"\bRUN_MODE\b"), "RUN_MODE (npu | cpu)"),
        _Required(re.compile(r"include\s*\([^)]*ascendc\.cmake"), "include(.../ascendc.cmake)"),
        _Required(re.compile(r"\bascendc_library\s*\("), "ascendc_library(...)"),
    ),
    "asc": (
        _Required(re.compile(r"set\s*\(\s*CMAKE_ASC_ARCHITECTURES\b"),
                  "set(CMAKE_ASC_ARCHITECTURES ...)"),
        _Required(re.compile(r"find_package\s*\(\s*ASC\b"), "find_package(ASC REQUIRED)"),
        _Required(re.compile(r"project\s*\([^)]*LANGUAGES[^)]*\bASC\b"),
                  "project(... LANGUAGES ASC CXX)"),
        _Required(re.compile(r"--npu-arch"), "--npu-arch=${CMAKE_ASC_ARCHITECTURES}"),
        _Required(re.compile(r"\bCMAKE_ASC_RUN_MODE\b"), "CMAKE_ASC_RUN_MODE (cpu twin)"),
    ),
}
_CMAKE_FORBIDDEN: dict[str, tuple[_Required, ...]] = {
    "legacy": (_Required(re.compile(r"find_package\s*\(\s*ASC\b"), "find_package(ASC)"),),
    "asc": (_Required(re.compile(r"\bascendc_library\s*\("), "ascendc_library"),
            _Required(re.compile(r"ascendc\.cmake"), "ascendc.cmake")),
}


def lint_cmake(text: str, *, generation: Generation, file: str = "CMakeLists.txt") -> \
        list[Finding]:
    """The lines a generation's CMakeLists.txt cannot do without, in the order they need."""
    code = re.sub(r"#[^\n]*", lambda match: " " * len(match.group(0)), text)
    findings: list[Finding] = []
    for required in _CMAKE_REQUIRED[generation]:
        if required.pattern.search(code) is None:
            findings.append(Finding("cmake", "error", 1, f"missing {required.what} "
                                    f"({generation} toolchain)", file))
    for forbidden in _CMAKE_FORBIDDEN[generation]:
        match = forbidden.pattern.search(code)
        if match is not None:
            findings.append(Finding("cmake", "error", _line(code, match.start()),
                                    f"{forbidden.what} belongs to the other toolchain "
                                    f"generation, not {generation}", file))
    if generation == "asc":
        findings += _asc_cmake_order(code, file)
    return findings


def _asc_cmake_order(code: str, file: str) -> list[Finding]:
    arch = re.search(r"set\s*\(\s*CMAKE_ASC_ARCHITECTURES\b", code)
    package = re.search(r"find_package\s*\(\s*ASC\b", code)
    project = re.search(r"project\s*\(", code)
    findings: list[Finding] = []
    if arch and package and arch.start() > package.start():
        findings.append(Finding("cmake", "error", _line(code, arch.start()),
                                "CMAKE_ASC_ARCHITECTURES must be set before "
                                "find_package(ASC)", file))
    if package and project and project.start() < package.start():
        findings.append(Finding("cmake", "warning", _line(code, project.start()),
                                "the ASC samples call find_package(ASC) before project(... "
                                "LANGUAGES ASC CXX)", file))
    return findings


# --------------------------------------------------------------------------- entry points


def lint_kernel(text: str, *, generation: Generation, file: str = "",
                expected_entries: Iterable[str] = ()) -> list[Finding]:
    """Rules for kernel sources (`<op>_kernel.cpp` / `.asc`)."""
    code = _blank(text, keep_strings=False)
    strings = _blank(text, keep_strings=True)
    entries = _entries(code, strings)
    findings = [
        *_queue_findings(code),
        *_header_findings(strings, "kernel"),
        *_entry_findings(code, entries, expected_entries),
        *_qualifier_findings(code, entries, generation),
        *_datacopy_findings(code),
        *_core_findings(code),
        *_launch_findings(code, generation),
    ]
    return [_with_file(item, file) for item in findings]


def lint_host(text: str, *, generation: Generation, file: str = "") -> list[Finding]:
    """Rules for host sources (binding, tiling header, CPU twin driver)."""
    code = _blank(text, keep_strings=False)
    strings = _blank(text, keep_strings=True)
    findings = [*_header_findings(strings, "host"), *_core_findings(code),
                *_launch_findings(code, generation)]
    return [_with_file(item, file) for item in findings]


def _with_file(finding: Finding, file: str) -> Finding:
    if not file or finding.file:
        return finding
    return Finding(finding.rule, finding.severity, finding.line, finding.message, file)


def lint_package(files: Mapping[str, str], *, generation: Generation | None = None) -> \
        list[Finding]:
    """Lint every source of a package (paths as package.render_package returns them).

    The generation and the expected entries come from ascendc/opbot.json when present.
    """
    manifest: dict[str, Any] = next((json.loads(text) for path, text in files.items()
                                     if path.endswith("opbot.json")), {})
    chosen: Generation = "asc" if (generation or manifest.get("generation")) == "asc" \
        else "legacy"
    entries = list(dict(manifest.get("entries", {})).values())
    findings: list[Finding] = []
    for path, text in files.items():
        name = path.rsplit("/", 1)[-1]
        if re.search(r"_kernel\.(cpp|asc)$", name):
            findings += lint_kernel(text, generation=chosen, file=path,
                                    expected_entries=entries)
        elif name.endswith((".cpp", ".asc", ".h")):
            findings += lint_host(text, generation=chosen, file=path)
        elif name == "CMakeLists.txt":
            findings += lint_cmake(text, generation=chosen, file=path)
    return findings
