"""Ascend toolchain output -> typed results, and compact feedback for the agent loop.

Every parser takes the raw text a tool printed (bisheng, the ACL runtime, torch_npu, msprof,
npu-smi, triton-ascend) and never raises on text it does not recognise: unknown lines are
skipped, unknown values become None. The formats were read from real outputs (the samples
under tests/data/ascend/, see its SOURCES.md). `feedback_text` renders any result as the few
plain lines an agent needs to fix a kernel: where, what, the source line, and a hint.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "note"]
DiagnosticKind = Literal["compile", "link", "backend", "tool"]

_MISSING = {"", "NA", "N/A", "-", "--", "nan", "None"}


class _Json:
    """Mixin: every result converts to plain JSON types the same way."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload, no-any-return]


def to_json(result: Any) -> Any:
    """A result, or a list of results, as plain JSON types."""
    if isinstance(result, list):
        return [to_json(item) for item in result]
    if isinstance(result, _Json):
        return result.to_json()
    return result


def _to_float(text: str | None) -> float | None:
    if text is None or text.strip() in _MISSING:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _to_int(text: str | None) -> int | None:
    value = _to_float(text)
    return int(value) if value is not None and value == int(value) else None


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- compiler (bisheng / clang-style) ----------------------------------------------------------


@dataclass
class Diagnostic(_Json):
    """One compiler or linker message; notes that explain an error are grouped under it."""

    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    source_line: str | None = None
    hint: str | None = None
    kind: DiagnosticKind = "compile"
    fatal: bool = False
    tool: str | None = None
    symbol: str | None = None  # the undefined symbol, or the function the backend failed on
    arch: str | None = None  # the target arch named on a crashed backend's command line
    suggestion: str | None = None  # clang's "did you mean '...'"
    referenced_by: list[str] = field(default_factory=list)
    include_chain: list[str] = field(default_factory=list)
    notes: list[Diagnostic] = field(default_factory=list)

    @property
    def location(self) -> str | None:
        if self.file is None:
            return None
        parts = [self.file] + [str(n) for n in (self.line, self.column) if n is not None]
        return ":".join(parts)


@dataclass
class CompilerReport(_Json):
    """Everything a failed build log says: diagnostics plus the counts and targets around them."""

    diagnostics: list[Diagnostic]
    errors_generated: int | None = None  # the sum of clang's "N errors generated." lines
    failed_targets: list[str] = field(default_factory=list)  # make targets that failed first


_DIAG = re.compile(
    r"^(?P<file>\S[^:]*?):(?P<line>\d+):(?P<col>\d+): "
    r"(?P<sev>fatal error|error|warning|note|remark): (?P<msg>.*)$")
_BACKEND = re.compile(
    r"^(?:(?P<tool>[\w.+-]+): )?(?:fatal error: error in backend|LLVM ERROR): (?P<msg>.*)$")
_TOOL = re.compile(
    r"^(?P<tool>ld\.lld|lld|ld|cceld|bisheng|ccec|clang\+\+|clang|ascendc_compiler): "
    r"(?P<sev>fatal error|error|warning): (?P<msg>.*)$")
_REFERENCED_BY = re.compile(r"^>>> referenced by (?P<ref>.+)$")
_INCLUDED_FROM = re.compile(r"^In file included from (?P<file>.+?):(?P<line>\d+)[:,]$")
_ERRORS_GENERATED = re.compile(r"^(?P<n>\d+) errors? generated\.?$")
_CARET = re.compile(r"^[\s~^]*\^[\s~^]*$")
_MAKE_ERROR = re.compile(
    r"^g?make(?:\[\d+\])?: \*\*\* \[(?:[^\]]*?:\d+: )?(?P<target>[^\]]+)\] Error (?P<code>\d+)")
_ASCENDC_WRAPPER = re.compile(
    r"Function AscendcCompiler at line \d+, (?P<msg>Command execution failed.*?)!?$")
_UNDECLARED = re.compile(r"use of undeclared identifier '(?P<name>[^']+)'")
_DID_YOU_MEAN = re.compile(r"did you mean '(?P<name>[^']+)'")
_UNDEFINED = re.compile(
    r"undefined (?:reference|symbol)(?: due to [^:]+)?: (?P<sym>.+)$"
    r"|undefined reference to [`'](?P<sym2>[^`']+)'")
_FILE_NOT_FOUND = re.compile(r"'(?P<header>[^']+)' file not found")
_EXPANDED_FROM = re.compile(r"expanded from macro '(?P<macro>[^']+)'")
_NO_MATCHING = re.compile(r"no matching function for call to '(?P<fn>[^']+)'")
_INTRINSICS_IMPL = re.compile(r"\b\w+IntrinsicsImpl\b")
_IMPL_ARCH_DIR = re.compile(r"/impl/(?P<dir>dav_[\w]+)/")
_ON_FUNCTION = re.compile(r"on function '@?(?P<fn>[^']+)'")
_ARCH_FLAG = re.compile(r"(?:--npu-arch|--cce-aicore-arch|-march)[= ](?P<arch>dav-[\w-]+)")


def parse_compiler_output(text: str) -> list[Diagnostic]:
    """The diagnostics in a bisheng/clang/ld.lld log, errors first-seen order, notes grouped."""
    return parse_compiler_report(text).diagnostics


def parse_compiler_report(text: str) -> CompilerReport:
    lines = text.splitlines()
    state = _DiagState()
    for index, raw in enumerate(lines):
        state.feed(lines, index, raw)
    diagnostics = state.finish(text)
    for diagnostic in diagnostics:
        diagnostic.hint = _compiler_hint(diagnostic)
    return CompilerReport(diagnostics, state.errors_generated, state.failed_targets)


class _DiagState:
    """The line-by-line grouping of a compiler log (one pass, no look-behind but the echo)."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.head: Diagnostic | None = None  # the error (or orphan note) that notes attach to
        self.includes: list[str] = []
        self.errors_generated: int | None = None
        self.failed_targets: list[str] = []

    def feed(self, lines: Sequence[str], index: int, raw: str) -> None:
        stripped = raw.strip()
        if not stripped:
            return
        for handler in (self._clang, self._backend, self._tool, self._referenced_by,
                        self._included_from, self._errors_generated, self._make_error,
                        self._ascendc_wrapper):
            if handler(lines, index, raw, stripped):
                return

    def _add(self, diagnostic: Diagnostic) -> None:
        if diagnostic.severity == "note" and self.head is not None:
            self.head.notes.append(diagnostic)
            return
        # A note with nothing before it (a log cut mid-diagnostic) heads its own group, so the
        # notes after it, and any hint they carry, are not lost.
        self.diagnostics.append(diagnostic)
        self.head = diagnostic

    def _clang(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        match = _DIAG.match(stripped)
        if match is None:
            return False
        severity = match["sev"]
        message = match["msg"].strip()
        diagnostic = Diagnostic(
            severity="error" if severity == "fatal error" else _severity(severity),
            message=message, file=match["file"], line=int(match["line"]),
            column=int(match["col"]), fatal=severity == "fatal error",
            source_line=_source_echo(lines, index, raw), include_chain=self.includes)
        self.includes = []
        self._add(diagnostic)
        return True

    def _backend(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        match = _BACKEND.match(stripped)
        if match is None:
            return False
        self._add(Diagnostic(severity="error", message=match["msg"].strip(), kind="backend",
                             fatal=True, tool=match["tool"] or "bisheng"))
        return True

    def _tool(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        match = _TOOL.match(stripped)
        if match is None:
            return False
        message = match["msg"].strip()
        undefined = _UNDEFINED.search(message)
        if undefined is not None:
            symbol = (undefined["sym"] or undefined["sym2"] or "").strip()
            self._add(Diagnostic(severity="error", message=f"undefined reference: {symbol}",
                                 kind="link", tool=match["tool"], symbol=symbol))
            return True
        # The driver's "linker command failed" only repeats the linker's own error.
        if message.startswith("linker command failed") and any(
                d.kind == "link" for d in self.diagnostics):
            return True
        sev = match["sev"]
        self._add(Diagnostic(severity="error" if sev == "fatal error" else _severity(sev),
                             message=message, kind="tool", tool=match["tool"],
                             fatal=sev == "fatal error"))
        return True

    def _referenced_by(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        match = _REFERENCED_BY.match(stripped)
        if match is None:
            return False
        if self.head is not None and self.head.kind == "link":
            self.head.referenced_by.append(match["ref"].strip())
        return True

    def _included_from(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        match = _INCLUDED_FROM.match(stripped)
        if match is None:
            return False
        self.includes = [*self.includes, f"{match['file']}:{match['line']}"]
        return True

    def _errors_generated(self, lines: Sequence[str], index: int, raw: str,
                          stripped: str) -> bool:
        match = _ERRORS_GENERATED.match(stripped)
        if match is None:
            return False
        # One line per translation unit: a parallel build prints several, so they add up.
        self.errors_generated = (self.errors_generated or 0) + int(match["n"])
        self.head = None
        return True

    def _make_error(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        match = _MAKE_ERROR.match(stripped)
        if match is None:
            return False
        # "Error 1" is the recipe that failed; "Error 2" lines are make recursing upwards.
        target = match["target"].strip()
        if match["code"] == "1" and target not in self.failed_targets:
            self.failed_targets.append(target)
        return True

    def _ascendc_wrapper(self, lines: Sequence[str], index: int, raw: str,
                         stripped: str) -> bool:
        match = _ASCENDC_WRAPPER.search(stripped)
        if match is None:
            return False
        self._add(Diagnostic(severity="error", kind="tool", tool="ascendc_compiler",
                             message=f"ascendc_compiler failed: {match['msg'].rstrip('!')}"))
        return True

    def finish(self, text: str) -> list[Diagnostic]:
        if self.includes:
            self._attach_dangling_includes()
        for diagnostic in self.diagnostics:
            if diagnostic.kind == "backend":
                _describe_backend_crash(diagnostic, text)
        return _dedupe(self.diagnostics)

    def _attach_dangling_includes(self) -> None:
        """An include chain with no diagnostic after it: the log was cut before the error."""
        chain = self.includes
        first_file, _, first_line = chain[0].rpartition(":")
        wrapper = next((d for d in self.diagnostics
                        if d.tool == "ascendc_compiler" and not d.include_chain), None)
        if wrapper is None:
            wrapper = Diagnostic(severity="error", kind="tool",
                                 message="compilation failed inside an included header")
            self.diagnostics.append(wrapper)
        wrapper.include_chain = chain
        # Point at the user's #include line: the only location the cut log still gives.
        wrapper.file, wrapper.line = first_file, _to_int(first_line)
        self.includes = []


def _severity(text: str) -> Severity:
    if text in ("error", "warning", "note"):
        return text  # type: ignore[return-value]
    return "note"  # clang's "remark" is informational


def _source_echo(lines: Sequence[str], index: int, raw: str) -> str | None:
    """The source line clang echoes under a diagnostic (the line before the ^~~ caret)."""
    if index + 2 >= len(lines) or not _CARET.match(lines[index + 2]):
        return None
    echo = lines[index + 1]
    if _DIAG.match(echo.strip()):
        return None
    indent = len(raw) - len(raw.lstrip())  # pip -v and CI wrappers indent the whole log
    if indent and not echo[:indent].strip():
        echo = echo[indent:]
    return echo.rstrip() or None


def _dedupe(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Drop exact repeats (tools that compile twice print the same error twice)."""
    seen: set[tuple[Any, ...]] = set()
    unique: list[Diagnostic] = []
    for diagnostic in diagnostics:
        key = (diagnostic.file, diagnostic.line, diagnostic.column, diagnostic.message,
               diagnostic.symbol)
        if key not in seen:
            seen.add(key)
            unique.append(diagnostic)
    return unique


def _describe_backend_crash(diagnostic: Diagnostic, text: str) -> None:
    """The stack dump after a backend crash names the kernel function and the target arch."""
    function = _ON_FUNCTION.search(text)
    if function is not None:
        diagnostic.symbol = function["fn"]
    arch = _ARCH_FLAG.search(text)
    if arch is not None:
        diagnostic.arch = arch["arch"]


def _compiler_hint(diagnostic: Diagnostic) -> str | None:
    undeclared = _UNDECLARED.search(diagnostic.message)
    suggestion = _DID_YOU_MEAN.search(diagnostic.message)
    if suggestion is not None:
        diagnostic.suggestion = suggestion["name"]
    for rule in (_hint_mangling, _hint_header, _hint_missing_api, _hint_undeclared_macro,
                 _hint_undefined_symbol, _hint_backend, _hint_cut_log):
        hint = rule(diagnostic, undeclared)
        if hint is not None:
            return hint
    return None


def _hint_mangling(diagnostic: Diagnostic, undeclared: re.Match[str] | None) -> str | None:
    if undeclared is None or diagnostic.suggestion is None:
        return None
    if "__cce_" not in diagnostic.suggestion:
        return None
    return (f"CANN 8.2.RC1 changed the name mangling of templated kernel launchers "
            f"('{undeclared['name']}' is now '{diagnostic.suggestion}'). Do not call the "
            "generated templated name: declare one extern \"C\" wrapper kernel per dtype and "
            "launch that.")


def _hint_header(diagnostic: Diagnostic, undeclared: re.Match[str] | None) -> str | None:
    missing = _FILE_NOT_FOUND.search(diagnostic.message)
    if missing is None:
        return None
    header = missing["header"]
    if re.search(r"(^|/)(inner_|impl/)", header):
        return (f"'{header}' is an internal CANN header; CANN upgrades move or remove them. "
                "Include only documented headers (kernel_operator.h) and use public APIs.")
    return (f"'{header}' is not on the include path: check the include directories for this "
            "CANN layout (8.5 moved ascend-toolkit/latest to cann/) and ASCEND_HOME_PATH.")


def _hint_missing_api(diagnostic: Diagnostic, undeclared: re.Match[str] | None) -> str | None:
    # The overload's name is often only in the echoed source line of a "candidate" note.
    texts = [diagnostic.message] + [f"{note.message} {note.source_line or ''}"
                                    for note in diagnostic.notes]
    if not any(_INTRINSICS_IMPL.search(text) for text in texts):
        return None
    arch_dirs = sorted({m["dir"] for note in diagnostic.notes if note.file
                        for m in [_IMPL_ARCH_DIR.search(note.file)] if m is not None})
    where = f" (implementation for {', '.join(arch_dirs)})" if arch_dirs else ""
    return ("This AscendC API has no implementation for these dtypes on this SOC" + where +
            ": no overload matches. Use a dtype/conversion the SOC supports, or gate the "
            "code with #if __NPU_ARCH__ == ... so each arch gets an API it has.")


def _hint_undeclared_macro(diagnostic: Diagnostic,
                           undeclared: re.Match[str] | None) -> str | None:
    if undeclared is None:
        return None
    name = undeclared["name"]
    if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
        return None
    macros = [m["macro"] for note in diagnostic.notes
              for m in [_EXPANDED_FROM.search(note.message)] if m is not None]
    via = f" (built by macro {macros[0]})" if macros else ""
    return (f"'{name}'{via} is a pipe/instruction name or macro that this SOC or CANN version "
            "does not define. Gate the code on __NPU_ARCH__ or use the API the installed "
            "CANN documents for this arch.")


def _hint_undefined_symbol(diagnostic: Diagnostic,
                           undeclared: re.Match[str] | None) -> str | None:
    if diagnostic.kind != "link" or not diagnostic.symbol:
        return None
    cpp = "(" in diagnostic.symbol
    linkage = (" It is looked up with C++ linkage (a parameter list is part of the name): "
               "declare and define it extern \"C\", or make the signatures match exactly."
               if cpp else "")
    return (f"Nothing defines '{diagnostic.symbol}' with this exact name and signature: the "
            "caller and the kernel disagree on its name, dtype or linkage." + linkage)


def _hint_backend(diagnostic: Diagnostic, undeclared: re.Match[str] | None) -> str | None:
    if diagnostic.kind != "backend":
        return None
    where = f" in '{diagnostic.symbol}'" if diagnostic.symbol else ""
    arch = diagnostic.arch or "the target arch"
    return (f"bisheng crashed in code generation{where}: it cannot lower an instruction for "
            f"{arch}, so the API behind it is unavailable there in this CANN version. This "
            "is not a C++ error: use another API or gate on __NPU_ARCH__.")


def _hint_cut_log(diagnostic: Diagnostic, undeclared: re.Match[str] | None) -> str | None:
    if not diagnostic.include_chain or diagnostic.kind != "tool":
        return None
    innermost = diagnostic.include_chain[-1].rpartition(":")[0]
    return (f"The compiler's message was cut off: the error is inside {innermost}, included "
            f"from {diagnostic.include_chain[0]}. Keep the full log to see it.")


# -- bisheng command lines ---------------------------------------------------------------------


@dataclass
class BishengInvocation(_Json):
    """What a bisheng command line builds: for which arch, from what, into what."""

    compiler: str
    arch: str | None = None
    language: str | None = None
    output: str | None = None
    shared: bool = False
    sources: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    defines: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


_SOURCE_SUFFIXES = (".asc", ".cpp", ".cc", ".cxx", ".c", ".cce")


def parse_bisheng_command(text: str) -> BishengInvocation | None:
    """The first bisheng command in a build log (make echo, shell trace), or None."""
    joined = re.sub(r"\\\s*\n", " ", text)
    for line in joined.splitlines():
        try:
            tokens = shlex.split(line)
        except ValueError:
            continue
        start = next((i for i, t in enumerate(tokens) if t.rsplit("/", 1)[-1] == "bisheng"),
                     None)
        if start is not None and start == 0:
            return _read_bisheng_tokens(tokens)
    return None


def _read_bisheng_tokens(args: list[str]) -> BishengInvocation:
    invocation = BishengInvocation(compiler=args[0])
    takes_value = {"-o": "output", "-I": "include", "-D": "define", "-x": "language",
                   "--npu-arch": "arch", "--cce-aicore-arch": "arch", "-mllvm": "flag"}
    rest = iter(args[1:])
    for arg in rest:
        if arg in takes_value:
            _set_bisheng_value(invocation, takes_value[arg], arg, next(rest, ""))
        elif "=" in arg and arg.split("=", 1)[0] in ("--npu-arch", "--cce-aicore-arch"):
            invocation.arch = arg.split("=", 1)[1]
        elif arg.startswith("-I") or arg.startswith("-D"):
            _set_bisheng_value(invocation, "include" if arg[1] == "I" else "define",
                               arg[:2], arg[2:])
        elif arg.startswith("-x") and len(arg) > 2:
            invocation.language = arg[2:]
        elif arg == "-shared":
            invocation.shared = True
        elif arg.endswith(_SOURCE_SUFFIXES) and not arg.startswith("-"):
            invocation.sources.append(arg)
        else:
            invocation.flags.append(arg)
    return invocation


def _set_bisheng_value(invocation: BishengInvocation, what: str, flag: str, value: str) -> None:
    if what == "output":
        invocation.output = value
    elif what == "include":
        invocation.include_dirs.append(value)
    elif what == "define":
        invocation.defines.append(value)
    elif what == "language":
        invocation.language = value
    elif what == "arch":
        invocation.arch = value
    else:
        invocation.flags.extend([flag, value])


# -- runtime (ACL / torch_npu / device logs) ---------------------------------------------------


@dataclass
class RuntimeFailure(_Json):
    """What a failed NPU run says: the ACL code, its meaning, the core and kernel at fault."""

    code: int | None = None
    code_inferred: bool = False  # taken from the retCode text because no number was printed
    meaning: str | None = None
    error_id: str | None = None
    error_ids: list[str] = field(default_factory=list)
    api: str | None = None
    call_site: str | None = None
    operator: str | None = None
    kernel: str | None = None
    pta_code: str | None = None
    device: int | None = None
    core_type: str | None = None
    core_id: int | None = None
    ret_code: str | None = None
    reason: str | None = None
    error_str: str | None = None
    environmental: bool = False  # the machine failed (busy, out of memory), not the kernel
    hint: str | None = None
    log_lines: list[str] = field(default_factory=list)


# Meanings in plain words, from the ACL runtime's code table (rt_error_codes.h).
_CODE_MEANINGS: dict[int, str] = {
    107000: "invalid parameter to a runtime call",
    107001: "invalid device id",
    107002: "no current context (the device was not set in this thread)",
    107003: "the stream is not in the current context",
    500000: "unknown internal error",
    500001: "ACL internal error",
    500002: "GE (graph engine) error, usually an operator that failed to compile or run",
    500003: "runtime internal error",
    500004: "driver internal error",
    507000: "runtime internal error on the host",
    507001: "task scheduler internal error on the device",
    507011: "model/stream execution failed",
    507013: "system DMA hardware error",
    507014: "AI Core timeout",
    507015: "AI Core exception",
    507016: "AI Core trap exception",
    507033: "device set failed (the device could not be started)",
    507034: "vector core timeout",
    507035: "vector core exception",
    507036: "vector core trap exception",
    507899: "driver internal error",
}
_CODE_FROM_REASON = {
    "aicore timeout": 507014,
    "aicore exception": 507015,
    "aicore trap exception": 507016,
    "vector core timeout": 507034,
    "vector core exception": 507035,
}
_ERROR_ID_MEANINGS = {
    "EL0004": "memory allocation failure",
    "EL0005": "resource busy",
    "EE1001": "invalid argument",
    "EZ9999": "inner error (details follow in the device record)",
    "E40024": "a Python function called by the operator compiler failed",
}
# Failures of the machine or the harness (no device, no context, busy, out of memory): the
# agent must not "fix" the kernel for these.
_ENVIRONMENTAL_CODES = {107001, 107002, 507033}
_ENVIRONMENTAL_IDS = {"EL0004", "EL0005"}

_CODE_PATTERNS = (
    re.compile(r"\bfailed: (?P<code>\d{6})\b"),
    re.compile(r"error code is (?P<code>\d+)"),
    re.compile(r"runtime result = (?P<code>\d+)"),
    re.compile(r"error code:\s*(?P<code>\d{6})\b"),
)
_ACL_CALL = re.compile(r"(?P<api>\w+)\([^()]*\) failed: \d+(?: \((?P<site>[^()]+?:\d+)\))?")
_NPU_FUNCTION = re.compile(
    r"NPU function error: (?:call (?P<call>\w+) failed|(?:[\w:]+::)?(?P<api>\w+)\()")
_OPS_FUNCTION = re.compile(r"OPS function error: (?P<op>\w+)")
_WORKING_OPERATOR = re.compile(r"current working operator name is (?P<op>\w+)")
_FAULT_KERNEL = re.compile(r"fault kernel_name=(?P<kernel>[^,\s]+)")
_ERROR_ID = re.compile(r"\b(E[A-Z]\d{4}|E\d{5})\b")
_PTA_CODE = re.compile(r"\b(ERR\d{5})\b")
_RET_CODE = re.compile(r"retCode=(?P<ret>0x[0-9a-fA-F]+), \[(?P<reason>[^\]]+)\]")
_REASON = re.compile(r"reason=\[(?P<reason>[^\]]+)\]")
_CORE = re.compile(r"(?:exception of (?P<a>[\w ]+?) error|there is an? (?P<b>[\w ]+?) error "
                   r"exception), core id is (?P<id>\d+)")
_ERROR_STR = re.compile(r"errorStr: (?P<text>.+?)(?: fixp_error0| subErrType|\[FUNC|$)")
_DEVICE = re.compile(r"device\(chipId:(?P<a>\d+)|\bDevice:(?P<b>\d+)|device_id=(?P<c>\d+)")
_RELEVANT = re.compile(
    r"failed: \d|RecentErrMsg|errorStr|retCode=|error code is|ERR\d{5}|\[Error\]|"
    r"runtime result|fault kernel_name|Inner error|E[A-Z]\d{4}:|E\d{5}:|reason=\[")
# Prefixes that wrappers put before the runtime's own text (vLLM workers, torch ranks, plog).
_LOG_PREFIX = re.compile(
    r"^(?:\(\w[^)]*\)\s*)+(?:ERROR|WARNING|INFO) [\d-]+ [\d:]+ \[[^\]]+\]\s?"
    r"|^\[rank\d+\]:\s?|^(?:ERROR|WARNING|INFO) [\d-]+ [\d:]+ \[[^\]]+\]\s?"
    r"|^\[(?:ERROR|WARNING|INFO|EVENT)\] [\w:]+\(\d+,[^)]*\):[\d.:-]+ \[[^\]]+\]\d*\s?")


def parse_runtime_error(text: str) -> RuntimeFailure:
    """The failure an ACL/torch_npu run printed; every field None when nothing matched."""
    lines = [_LOG_PREFIX.sub("", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    body = "\n".join(lines)
    failure = RuntimeFailure()
    _runtime_code(failure, body)
    _runtime_where(failure, body)
    _runtime_core(failure, body)
    failure.error_ids = list(dict.fromkeys(_ERROR_ID.findall(body)))
    failure.error_id = failure.error_ids[0] if failure.error_ids else None
    pta = _PTA_CODE.search(body)
    failure.pta_code = pta.group(1) if pta else None
    failure.meaning = _runtime_meaning(failure)
    failure.environmental = (failure.code in _ENVIRONMENTAL_CODES
                             or bool(_ENVIRONMENTAL_IDS & set(failure.error_ids)))
    failure.hint = _runtime_hint(failure, body)
    failure.log_lines = [_clip(line) for line in dict.fromkeys(
        line for line in lines if _RELEVANT.search(line))][:8]
    return failure


def _runtime_code(failure: RuntimeFailure, body: str) -> None:
    for pattern in _CODE_PATTERNS:
        match = pattern.search(body)
        if match is not None:
            failure.code = int(match["code"])
            return
    ret = _RET_CODE.search(body)
    if ret is not None and ret["reason"] in _CODE_FROM_REASON:
        failure.code = _CODE_FROM_REASON[ret["reason"]]
        failure.code_inferred = True


def _runtime_where(failure: RuntimeFailure, body: str) -> None:
    call = _ACL_CALL.search(body)
    if call is not None:
        failure.api, failure.call_site = call["api"], call["site"]
    npu = _NPU_FUNCTION.search(body)
    if npu is not None:
        failure.api = failure.api or npu["api"]
        failure.operator = npu["call"]  # "call aclnnXxx failed": an operator, not an ACL call
    for pattern in (_OPS_FUNCTION, _WORKING_OPERATOR):
        match = pattern.search(body)
        if match is not None and failure.operator is None:
            failure.operator = match["op"]
    kernel = _FAULT_KERNEL.search(body)
    failure.kernel = kernel["kernel"] if kernel else None
    device = _DEVICE.search(body)
    if device is not None:
        failure.device = int(device["a"] or device["b"] or device["c"])


def _runtime_core(failure: RuntimeFailure, body: str) -> None:
    core = _CORE.search(body)
    if core is not None:
        failure.core_type = (core["a"] or core["b"]).strip()
        failure.core_id = int(core["id"])
    ret = _RET_CODE.search(body)
    if ret is not None:
        failure.ret_code, failure.reason = ret["ret"], ret["reason"]
    else:
        # Several reason=[...] may appear ("driver error:internal error" before "aicore
        # timeout"): the one that names a known failure is the cause.
        reasons = _REASON.findall(body)
        known = [reason for reason in reasons if reason in _CODE_FROM_REASON]
        failure.reason = (known or reasons or [None])[0]
    error_str = _ERROR_STR.search(body)
    if error_str is not None:
        failure.error_str = error_str["text"].strip().rstrip(".").strip()


def _runtime_meaning(failure: RuntimeFailure) -> str | None:
    parts: list[str] = []
    if failure.code is not None:
        parts.append(_CODE_MEANINGS.get(failure.code, f"ACL error {failure.code}"))
    for error_id in failure.error_ids:
        meaning = _ERROR_ID_MEANINGS.get(error_id)
        if meaning and error_id != "EZ9999":
            parts.append(meaning)
    if failure.error_str:
        parts.append(failure.error_str)
    elif failure.reason and _CODE_FROM_REASON.get(failure.reason) != failure.code:
        parts.append(failure.reason)  # unless it only repeats what the code already says
    return "; ".join(dict.fromkeys(parts)) or None


def _runtime_hint(failure: RuntimeFailure, body: str) -> str | None:
    text = f"{failure.error_str or ''} {failure.reason or ''}".lower()
    code = failure.code
    if failure.environmental:
        return ("The machine failed, not the kernel (device busy, out of memory, or no "
                "device/context): check npu-smi for other processes, then rerun.")
    if "ub address out of bounds" in text:
        return ("A vector instruction touched UB outside its buffers: check the tile length "
                "against InitBuffer sizes and the count passed for the tail tile.")
    if "mte instruction is out of range" in text or "mpu address" in text:
        return ("A data copy read or wrote global memory outside the tensor: check the GM "
                "offsets (block index x block length + tile offset) and tail handling.")
    if "d-cache" in text:
        return ("A scalar access (GetValue/SetValue, pointer arithmetic) hit an invalid "
                "address: check scalar indices and GM/UB pointer offsets.")
    if code in (507014, 507034) or "timeout" in text:
        return ("The kernel never finished: look for a hang (unbalanced EnQue/DeQue or "
                "SetFlag/WaitFlag, a SyncAll over more blocks than run, an endless loop) or "
                "far too much work per core.")
    if code in (507015, 507035, 507016, 507036):
        return ("The kernel faulted on the device: usually an out-of-bounds or misaligned "
                "access. Run the CPU debug build to find the line.")
    if code == 500002:
        return ("An operator failed in the graph engine (compiling or running it): the "
                "E-coded message after it says why.")
    if code == 507011:
        return ("A task on the stream failed or hung while the host waited for it: the first "
                "device error earlier in the log is the cause.")
    if failure.pta_code or "Inner error happened" in body:
        return ("torch_npu reports an earlier device failure: the first error in the log "
                "(or the plog) is the real one.")
    return None


# -- msprof op: OpBasicInfo.csv, PipeUtilization.csv, op_summary, op_statistic ----------------


@dataclass
class OpTiming(_Json):
    """One row of msprof op's OpBasicInfo.csv."""

    op_name: str
    op_type: str | None
    task_duration_us: float | None
    block_dim: int | None
    mix_block_dim: int | None
    device_id: int | None
    pid: int | None
    current_freq_mhz: int | None
    rated_freq_mhz: int | None


def _csv_rows(csv_text: str) -> list[dict[str, str]]:
    """CSV rows keyed by stripped header; msprof's trailing comma column is dropped."""
    reader = csv.DictReader(io.StringIO(csv_text.strip()))
    rows: list[dict[str, str]] = []
    for row in reader:
        rows.append({(key or "").strip(): (value or "").strip()
                     for key, value in row.items() if key and key.strip()})
    return rows


def parse_op_basic_info(csv_text: str) -> list[OpTiming]:
    return [OpTiming(
        op_name=row.get("Op Name", ""), op_type=row.get("Op Type") or None,
        task_duration_us=_to_float(row.get("Task Duration(us)")),
        block_dim=_to_int(row.get("Block Dim")), mix_block_dim=_to_int(row.get("Mix Block Dim")),
        device_id=_to_int(row.get("Device Id", row.get("Device ID"))), pid=_to_int(row.get("Pid")),
        current_freq_mhz=_to_int(row.get("Current Freq")),
        rated_freq_mhz=_to_int(row.get("Rated Freq"))) for row in _csv_rows(csv_text)]


@dataclass
class PipeStat(_Json):
    time_us: float | None
    ratio: float | None
    active_bw_gbs: float | None = None


@dataclass
class PipeRow(_Json):
    """One core's row: block_id/sub_block_id (cube0, vector0, vector1...) and its pipes."""

    block_id: int | None
    sub_block_id: str
    core: Literal["aic", "aiv"]
    time_us: float | None
    total_cycles: int | None
    icache_miss_rate: float | None
    pipes: dict[str, PipeStat]


@dataclass
class PipeAggregate(_Json):
    """One pipe (e.g. aiv_mte2) over every row where it ran."""

    name: str
    core: Literal["aic", "aiv"]
    pipe: str
    rows: int
    time_us_total: float
    time_us_max: float
    ratio_mean: float
    ratio_max: float
    active_bw_gbs_mean: float | None


@dataclass
class PipeReport(_Json):
    rows: list[PipeRow]
    pipes: list[PipeAggregate]  # highest mean ratio first
    bottleneck: str | None  # the name of pipes[0]
    bottleneck_ratio: float | None
    core_time_us_max: float | None  # the slowest core: what the kernel waits for
    core_time_us_min: float | None


_PIPE_COLUMN = re.compile(r"^(?P<core>aic|aiv)_(?P<pipe>[a-z0-9]+)_(?P<what>time\(us\)|ratio|"
                          r"active_bw\(GB/s\))$")
_PIPE_HINTS = {
    "vec": ("vector compute bound: fewer vector instructions per element (fuse ops, drop "
            "needless casts), each over a whole tile"),
    "scalar": ("scalar bound: index math, loop control and scalar reads dominate; hoist them, "
               "use bigger tiles and fewer iterations"),
    "mte2": ("GM->UB loads dominate (memory bound): larger contiguous tiles, double "
             "buffering (BUFFER_NUM=2) so loads overlap compute"),
    "mte3": "UB->GM stores dominate: larger contiguous writes, overlap with compute",
    "mte1": "L1->L0 moves dominate: reuse L0 tiles across more cube steps",
    "cube": "cube (matrix) bound: good for matmul; check the tiling keeps the cube fed",
    "mac": "cube (matrix) bound: good for matmul; check the tiling keeps the cube fed",
    "fixpipe": "L0C->output path dominates: fuse the epilogue, fewer output conversions",
}


def parse_pipe_utilization(csv_text: str) -> PipeReport:
    """msprof op's PipeUtilization.csv, any schema (with or without *_active_bw, mix or not)."""
    rows: list[PipeRow] = []
    for row in _csv_rows(csv_text):
        rows.extend(_pipe_rows(row))
    return _pipe_report(rows)


def _pipe_rows(row: dict[str, str]) -> list[PipeRow]:
    """A CSV row holds aic_* and aiv_* columns; a core that did not run has NA in its own."""
    out: list[PipeRow] = []
    for core in ("aic", "aiv"):
        time_us = _to_float(row.get(f"{core}_time(us)"))
        if time_us is None:
            continue
        out.append(PipeRow(
            block_id=_to_int(row.get("block_id")), sub_block_id=row.get("sub_block_id", ""),
            core=core, time_us=time_us, total_cycles=_to_int(row.get(f"{core}_total_cycles")),
            icache_miss_rate=_to_float(row.get(f"{core}_icache_miss_rate")),
            pipes=_pipe_stats(row, core)))
    return out


def _pipe_stats(row: dict[str, str], core: str) -> dict[str, PipeStat]:
    found: dict[str, dict[str, float | None]] = {}
    for column, value in row.items():
        match = _PIPE_COLUMN.match(column)
        if match is None or match["core"] != core or match["pipe"] == "total":
            continue
        found.setdefault(match["pipe"], {})[match["what"]] = _to_float(value)
    return {pipe: PipeStat(values.get("time(us)"), values.get("ratio"),
                           values.get("active_bw(GB/s)"))
            for pipe, values in found.items()
            if values.get("time(us)") is not None or values.get("ratio") is not None}


def _pipe_report(rows: list[PipeRow]) -> PipeReport:
    aggregates = _aggregate_pipes((row.core, row.pipes) for row in rows)
    times = [row.time_us for row in rows if row.time_us is not None]
    top = aggregates[0] if aggregates else None
    return PipeReport(rows=rows, pipes=aggregates, bottleneck=top.name if top else None,
                      bottleneck_ratio=top.ratio_mean if top else None,
                      core_time_us_max=max(times) if times else None,
                      core_time_us_min=min(times) if times else None)


def _aggregate_pipes(per_row: Iterable[tuple[str, dict[str, PipeStat]]]) -> list[PipeAggregate]:
    collected: dict[tuple[str, str], list[PipeStat]] = {}
    for core, pipes in per_row:
        for pipe, stat in pipes.items():
            collected.setdefault((core, pipe), []).append(stat)
    aggregates = [_aggregate(core, pipe, stats) for (core, pipe), stats in collected.items()]
    # Highest mean ratio first; time breaks ties (the ratio is time over the core's time).
    aggregates.sort(key=lambda a: (a.ratio_mean, a.time_us_total), reverse=True)
    return aggregates


def _aggregate(core: str, pipe: str, stats: list[PipeStat]) -> PipeAggregate:
    ratios = [s.ratio for s in stats if s.ratio is not None]
    times = [s.time_us for s in stats if s.time_us is not None]
    bws = [s.active_bw_gbs for s in stats if s.active_bw_gbs is not None]
    return PipeAggregate(
        name=f"{core}_{pipe}", core="aic" if core == "aic" else "aiv", pipe=pipe,
        rows=len(stats), time_us_total=sum(times), time_us_max=max(times, default=0.0),
        ratio_mean=sum(ratios) / len(ratios) if ratios else 0.0,
        ratio_max=max(ratios, default=0.0),
        active_bw_gbs_mean=sum(bws) / len(bws) if bws else None)


@dataclass
class OpSummaryRow(_Json):
    """One task of msprof's op_summary_*.csv (whole-application profiling)."""

    op_name: str
    op_type: str | None
    task_type: str | None
    task_id: int | None
    stream_id: int | None
    device_id: int | None
    task_duration_us: float | None
    task_wait_us: float | None
    block_dim: int | None
    mix_block_dim: int | None
    aicore_time_us: float | None
    aiv_time_us: float | None
    cube_utilization_pct: float | None
    pipes: list[PipeAggregate]
    bottleneck: str | None


def parse_op_summary(csv_text: str) -> list[OpSummaryRow]:
    out: list[OpSummaryRow] = []
    for row in _csv_rows(csv_text):
        pipes = _aggregate_pipes(
            (core, _pipe_stats(row, core)) for core in ("aic", "aiv")
            if _to_float(row.get("aicore_time(us)" if core == "aic" else "aiv_time(us)")))
        out.append(OpSummaryRow(
            op_name=row.get("Op Name", ""), op_type=row.get("OP Type") or None,
            task_type=row.get("Task Type") or None, task_id=_to_int(row.get("Task ID")),
            stream_id=_to_int(row.get("Stream ID")), device_id=_to_int(row.get("Device_id")),
            task_duration_us=_to_float(row.get("Task Duration(us)")),
            task_wait_us=_to_float(row.get("Task Wait Time(us)")),
            block_dim=_to_int(row.get("Block Dim")),
            mix_block_dim=_to_int(row.get("Mix Block Dim")),
            aicore_time_us=_to_float(row.get("aicore_time(us)")),
            aiv_time_us=_to_float(row.get("aiv_time(us)")),
            cube_utilization_pct=_to_float(row.get("cube_utilization(%)")),
            pipes=pipes, bottleneck=pipes[0].name if pipes else None))
    return out


@dataclass
class OpStatistic(_Json):
    """One row of op_statistic_*.csv: per-op-type totals (what do_bench's NPU path reads)."""

    op_type: str
    core_type: str | None
    count: int | None
    total_us: float | None
    min_us: float | None
    avg_us: float | None
    max_us: float | None
    ratio_pct: float | None
    device_id: int | None


def parse_op_statistic(csv_text: str) -> list[OpStatistic]:
    return [OpStatistic(
        op_type=row.get("OP Type", ""), core_type=row.get("Core Type") or None,
        count=_to_int(row.get("Count")), total_us=_to_float(row.get("Total Time(us)")),
        min_us=_to_float(row.get("Min Time(us)")), avg_us=_to_float(row.get("Avg Time(us)")),
        max_us=_to_float(row.get("Max Time(us)")), ratio_pct=_to_float(row.get("Ratio(%)")),
        device_id=_to_int(row.get("Device_id"))) for row in _csv_rows(csv_text)]


@dataclass
class MsprofConsole(_Json):
    """What msprof op printed: where the results went, and whether it got that far."""

    output_dir: str | None = None
    metrics: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    started: bool = False
    finished: bool = False
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.finished and self.output_dir is not None and not self.errors


_MSPROF_LINE = re.compile(
    r"^(?:[\d-]+ [\d:]+ )?\[(?P<level>INFO|WARNING|WARN|ERROR)\]\s*(?P<m>.*)$")


def parse_msprof_console(text: str) -> MsprofConsole:
    console = MsprofConsole()
    for raw in text.splitlines():
        match = _MSPROF_LINE.match(raw.strip())
        if match is None:
            continue
        level, message = match["level"], match["m"].strip()
        if level == "ERROR":
            console.errors.append(message)
        elif level.startswith("WARN"):
            console.warnings.append(message)
        _msprof_info(console, message)
    return console


def _msprof_info(console: MsprofConsole, message: str) -> None:
    saved = re.match(r"Profiling results saved in (?P<dir>.+)$", message)
    metric = re.match(r"Save profiling data with metric \[(?P<m>[^\]]+)\] success", message)
    task = re.match(r"Running device task: (?P<t>.+)$", message)
    if saved is not None:
        console.output_dir = saved["dir"].strip()
    elif metric is not None:
        console.metrics.append(metric["m"])
    elif task is not None:
        console.tasks.append(task["t"].strip())
    elif message.startswith("Op profiling analysis start"):
        console.started = True
    elif message.startswith("Profiling data parse finished"):
        console.finished = True


# -- npu-smi -----------------------------------------------------------------------------------


@dataclass
class NpuChip(_Json):
    """One chip (one logical device) of the `npu-smi info` table."""

    npu_id: int
    chip_id: int | None
    name: str
    health: str | None = None
    phy_id: int | None = None  # the A3 layout ("Chip  Phy-ID") numbers every die
    bus_id: str | None = None
    power_w: float | None = None
    temp_c: float | None = None
    aicore_pct: float | None = None
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    hbm_used_mb: int | None = None
    hbm_total_mb: int | None = None


@dataclass
class NpuProcess(_Json):
    npu_id: int
    chip_id: int | None
    pid: int
    name: str
    memory_mb: int | None


@dataclass
class NpuSmiInfo(_Json):
    smi_version: str | None = None
    chips: list[NpuChip] = field(default_factory=list)
    processes: list[NpuProcess] = field(default_factory=list)
    phy_id_layout: bool = False

    @property
    def device_count(self) -> int:
        """Logical devices: one per chip (A3 boards show two chips per NPU, each a device)."""
        return len(self.chips)

    @property
    def npu_count(self) -> int:
        return len({chip.npu_id for chip in self.chips})


_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_SMI_VERSION = re.compile(r"npu-smi\s+(?P<v>\S+)")
_USAGE_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def parse_npu_smi(text: str) -> NpuSmiInfo:
    """`npu-smi info` (the 98-column, A3 Phy-ID and wide 116-column tables)."""
    info = NpuSmiInfo()
    in_processes = False
    pending: NpuChip | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        version = _SMI_VERSION.search(line)
        if info.smi_version is None and version is not None:
            info.smi_version = version["v"]
            continue
        if "Phy-ID" in cells[0]:
            info.phy_id_layout = True
        if cells[0].startswith("NPU") and any("Process" in cell for cell in cells):
            in_processes = True
            continue
        if in_processes:
            _smi_process_row(info, cells)
        else:
            pending = _smi_chip_row(info, cells, pending)
    return info


def _smi_chip_row(info: NpuSmiInfo, cells: list[str], pending: NpuChip | None) -> NpuChip | None:
    """The table gives each chip two rows: `npu name | health | power temp ...` then
    `chip [phy-id] | bus-id | aicore memory hbm`. Returns the chip awaiting its second row."""
    if len(cells) < 3:
        return pending
    first = cells[0].split()
    if len(first) >= 2 and first[0].isdigit() and not _BUS_ID.match(cells[1]):
        numbers = cells[2].split()
        return NpuChip(npu_id=int(first[0]), chip_id=None, name=" ".join(first[1:]),
                       health=cells[1] or None,
                       power_w=_to_float(numbers[0]) if numbers else None,
                       temp_c=_to_float(numbers[1]) if len(numbers) > 1 else None)
    if pending is not None and first and first[0].isdigit() and _BUS_ID.match(cells[1]):
        pending.chip_id = int(first[0])
        pending.phy_id = int(first[1]) if len(first) > 1 and first[1].isdigit() else None
        pending.bus_id = cells[1]
        _smi_usage(pending, cells[2])
        info.chips.append(pending)
        return None
    return pending


def _smi_usage(chip: NpuChip, cell: str) -> None:
    head = cell.split()
    chip.aicore_pct = _to_float(head[0]) if head else None
    pairs = _USAGE_PAIR.findall(cell)
    if pairs:
        chip.memory_used_mb, chip.memory_total_mb = int(pairs[0][0]), int(pairs[0][1])
    if len(pairs) > 1:
        chip.hbm_used_mb, chip.hbm_total_mb = int(pairs[-1][0]), int(pairs[-1][1])


def _smi_process_row(info: NpuSmiInfo, cells: list[str]) -> None:
    if len(cells) < 4:
        return
    ids = cells[0].split()
    if len(ids) < 1 or not ids[0].isdigit() or not cells[1].isdigit():
        return
    info.processes.append(NpuProcess(
        npu_id=int(ids[0]), chip_id=int(ids[1]) if len(ids) > 1 and ids[1].isdigit() else None,
        pid=int(cells[1]), name=cells[2], memory_mb=_to_int(cells[3])))


@dataclass
class NpuSmiChipName(_Json):
    npu_id: int
    chip_id: int
    logic_id: int | None
    name: str


def parse_npu_smi_chip_names(text: str) -> list[NpuSmiChipName]:
    """`npu-smi info -m`: NPU ID, Chip ID, Chip Logic ID, Chip Name ("Ascend 910B3", "Mcu")."""
    out: list[NpuSmiChipName] = []
    for raw in text.splitlines():
        parts = raw.split()
        if len(parts) < 4 or not (parts[0].isdigit() and parts[1].isdigit()):
            continue
        name = " ".join(parts[3:])
        if name.lower() == "mcu":  # the board's management controller, not a device
            continue
        out.append(NpuSmiChipName(int(parts[0]), int(parts[1]),
                                  int(parts[2]) if parts[2].isdigit() else None, name))
    return out


_SMI_PROCESS_INLINE = re.compile(
    r"Process id:(?P<pid>\d+)\s+Process name:(?P<name>.*?)\s+Process memory\(MB\):(?P<mem>\d+)")


def parse_npu_smi_fields(text: str) -> list[dict[str, str]]:
    """`npu-smi info -t board|common|proc-mem -i N`: `Key : value` blocks, one dict per block."""
    blocks: list[dict[str, str]] = [{}]
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            if blocks[-1]:
                blocks.append({})
            continue
        inline = _SMI_PROCESS_INLINE.search(line)
        if inline is not None:
            blocks[-1].update({"Process id": inline["pid"], "Process name": inline["name"],
                               "Process memory(MB)": inline["mem"]})
            continue
        key, sep, value = line.partition(" : ")
        if sep:
            blocks[-1][key.strip()] = value.strip()
    return [block for block in blocks if block]


# -- triton-ascend -----------------------------------------------------------------------------

TritonErrorKind = Literal[
    "ub_overflow", "grid_too_large", "unknown_target", "bishengir_failed", "no_driver", "unknown"]


@dataclass
class TritonAscendError(_Json):
    kind: TritonErrorKind
    message: str | None = None
    required_bits: int | None = None
    available_bits: int | None = None
    grid_limit: int | None = None
    target: str | None = None
    location: str | None = None  # file:line of the kernel, when the MLIR loc() names it
    hint: str | None = None


_TRITON_PREFIX = re.compile(r"^(?:\[?rank\d+\]:\s?|E\s(?=\S)|E$)")
_UB_OVERFLOW = re.compile(r"ub overflow, requires (?P<req>\d+) bits while (?P<avail>\d+) bits "
                          r"ava\w*ble")
_UB_NOTE = re.compile(r"Due to Ub overflow", re.IGNORECASE)
_GRID = re.compile(r"grid should be less than (?P<n>\d+)|coreDim=\S* can't be greater than "
                   r"UINT16_MAX")
_UNKNOWN_TARGET = re.compile(r"for the --target option: Cannot find option named '(?P<t>[^']+)'")
_BISHENGIR = re.compile(r"Failed to run Bisheng\w* \w*\s*pipeline|bishengir-\w*compile|"
                        r"CalledProcessError|linalg_to_bin", re.IGNORECASE)
_NO_DRIVER = re.compile(r"0 active drivers")
_MLIR_LOC = re.compile(r'loc\("(?P<file>[^"]+)":(?P<line>\d+):\d+\)')


def parse_triton_ascend_error(text: str) -> TritonAscendError:
    lines = [_TRITON_PREFIX.sub("", raw.strip()).strip() for raw in text.splitlines()]
    body = "\n".join(lines)
    ub = _UB_OVERFLOW.search(body)
    if ub is not None or _UB_NOTE.search(body):
        return _ub_overflow(body, ub)
    target = _UNKNOWN_TARGET.search(body)
    if target is not None:
        return TritonAscendError(
            kind="unknown_target", target=target["t"], message=target.group(0),
            hint=(f"bishengir-compile in this CANN does not know the target '{target['t']}' "
                  "(the SOC name the runtime reported): this triton-ascend/CANN pair does not "
                  "support this chip. Check the pairing and upgrade CANN or triton-ascend."))
    grid = _GRID.search(body)
    if grid is not None:
        limit = int(grid["n"]) - 1 if grid["n"] else 65535
        return TritonAscendError(
            kind="grid_too_large", grid_limit=limit,
            message=_last_line_with(lines, grid.group(0)),
            hint=(f"The launch grid is above {limit}: on Ascend the grid is the number of "
                  "physical cores. Launch a 1-D grid of num_vectorcore (num_aicore with "
                  "tl.dot) programs and loop over the blocks inside the kernel, or set "
                  "TRITON_ALL_BLOCKS_PARALLEL=1."))
    if _BISHENGIR.search(body):
        message = ("bishengir-compile exited with an error (subprocess.CalledProcessError)"
                   if "CalledProcessError" in body else _first_error_line(lines))
        return TritonAscendError(
            kind="bishengir_failed", message=message, location=_kernel_loc(body),
            hint=("bishengir-compile failed to build the kernel; its stderr holds the reason "
                  "(UB overflow, an unsupported op or dtype). Rerun with TRITON_DEBUG=1."))
    if _NO_DRIVER.search(body):
        return TritonAscendError(
            kind="no_driver", message=_last_line_with(lines, "0 active drivers"),
            hint="No NPU/CANN here: run with TRITON_INTERPRET=1 on CPU tensors instead.")
    return TritonAscendError(kind="unknown", message=_first_error_line(lines))


def _ub_overflow(body: str, ub: re.Match[str] | None) -> TritonAscendError:
    required = int(ub["req"]) if ub else None
    available = int(ub["avail"]) if ub else None
    if required and available:
        factor = math.ceil(10 * required / available) / 10  # the smallest shrink that fits
        size = (f"needs {required // 8 // 1024} KB of UB but {available // 8 // 1024} KB "
                f"exist; shrink the per-iteration block at least {factor:g}x")
    else:
        size = "does not fit in UB; shrink the per-iteration block"
    return TritonAscendError(
        kind="ub_overflow", required_bits=required, available_bits=available,
        message=ub.group(0) if ub else "ub overflow", location=_kernel_loc(body),
        hint=(f"UB overflow: the kernel's working set {size} (lower XBLOCK_SUB, or XBLOCK, "
              "and loop over sub-blocks inside the kernel). Multi-buffering doubles it."))


def _kernel_loc(body: str) -> str | None:
    """The first loc() naming the Python kernel source; temporary .mlir files mean nothing
    to the agent, so they are not reported."""
    for match in _MLIR_LOC.finditer(body):
        if match["file"].endswith(".py"):
            return f"{match['file']}:{match['line']}"
    return None


def _last_line_with(lines: Sequence[str], needle: str) -> str | None:
    """The last line holding the message: the raised error, not the `raise` source echo."""
    return next((line for line in reversed(lines) if needle in line), None)


def _first_error_line(lines: Sequence[str]) -> str | None:
    for line in lines:
        if re.search(r"\berror\b|Error:|Exception|failed", line, re.IGNORECASE):
            return _clip(line)
    return None


# -- feedback for the agent loop -------------------------------------------------------------


def feedback_text(result: Any, limit: int = 10) -> str:
    """A compact plain-text rendering of any parser result (or list of them)."""
    if isinstance(result, CompilerReport):
        return _compiler_feedback(result.diagnostics, limit, result.errors_generated)
    if isinstance(result, list):
        if not result:
            return "nothing to report"
        if all(isinstance(item, Diagnostic) for item in result):
            return _compiler_feedback(result, limit, None)
        return "\n".join(feedback_text(item, limit) for item in result[:limit])
    renderers: dict[type, Callable[[Any], str]] = {
        Diagnostic: _diagnostic_feedback,
        RuntimeFailure: _runtime_feedback, PipeReport: _pipe_feedback,
        OpTiming: _timing_feedback, OpSummaryRow: _summary_feedback,
        OpStatistic: _statistic_feedback, TritonAscendError: _triton_feedback,
        MsprofConsole: _console_feedback, NpuSmiInfo: _smi_feedback,
        BishengInvocation: _invocation_feedback,
    }
    renderer = renderers.get(type(result))
    return renderer(result) if renderer is not None else str(result)


def _compiler_feedback(diagnostics: Sequence[Diagnostic], limit: int,
                       errors_generated: int | None) -> str:
    if not diagnostics:
        return "no compiler diagnostics found in the log"
    blocks = [_diagnostic_feedback(d) for d in diagnostics[:limit]]
    shown = sum(1 for d in diagnostics[:limit] if d.severity == "error")
    if len(diagnostics) > limit:
        blocks.append(f"... {len(diagnostics) - limit} more diagnostics")
    if errors_generated is not None and errors_generated > shown:
        blocks.append(f"({errors_generated} errors generated; {shown} of them are in this "
                      "log: it was cut)")
    return "\n".join(blocks)


def _diagnostic_feedback(diagnostic: Diagnostic) -> str:
    where = diagnostic.location or diagnostic.tool or "?"
    lines = [f"{where}: {diagnostic.severity}: {diagnostic.message}"]
    if diagnostic.source_line:
        lines.append(f"    {diagnostic.source_line.strip()}")
    if diagnostic.referenced_by:
        lines.append(f"  referenced by {', '.join(diagnostic.referenced_by)}")
    for note in diagnostic.notes[:4]:
        lines.append(f"  note: {note.location or '?'}: {note.message}")
    if len(diagnostic.notes) > 4:
        lines.append(f"  ... {len(diagnostic.notes) - 4} more notes")
    if diagnostic.hint:
        lines.append(f"  hint: {diagnostic.hint}")
    return "\n".join(lines)


def _runtime_feedback(failure: RuntimeFailure) -> str:
    code = f"{failure.code}{' (inferred)' if failure.code_inferred else ''}"
    head = f"runtime error {code if failure.code is not None else '(no code)'}"
    if failure.meaning:
        head += f": {failure.meaning}"
    lines = [head]
    details = [f"{label} {value}" for label, value in (
        ("api", failure.api), ("at", failure.call_site), ("kernel", failure.kernel),
        ("operator", failure.operator), ("core", failure.core_type), ("id", failure.error_id))
        if value]
    if details:
        lines.append("  " + ", ".join(details))
    if failure.hint:
        lines.append(f"  hint: {failure.hint}")
    return "\n".join(lines)


def _pipe_feedback(report: PipeReport) -> str:
    if report.bottleneck is None:
        return "PipeUtilization: no pipe data"
    top = report.pipes[0]
    lines = [f"bottleneck: {top.name} {top.ratio_mean:.1%} of core time "
             f"({top.time_us_total:.2f} us over {top.rows} core(s))"]
    others = ", ".join(f"{p.name} {p.ratio_mean:.1%}" for p in report.pipes[1:5])
    if others:
        lines.append(f"  then: {others}")
    if report.core_time_us_max is not None and report.core_time_us_min is not None:
        lines.append(f"  core time {report.core_time_us_min:.2f}-{report.core_time_us_max:.2f}"
                     f" us over {len(report.rows)} core(s)")
    hint = _PIPE_HINTS.get(top.pipe)
    if hint:
        lines.append(f"  hint: {hint}")
    return "\n".join(lines)


def _timing_feedback(timing: OpTiming) -> str:
    mix = f", mix block dim {timing.mix_block_dim}" if timing.mix_block_dim is not None else ""
    return (f"{timing.op_name} ({timing.op_type}): {timing.task_duration_us} us, block dim "
            f"{timing.block_dim}{mix}, {timing.current_freq_mhz}/{timing.rated_freq_mhz} MHz")


def _summary_feedback(row: OpSummaryRow) -> str:
    top = f", bottleneck {row.pipes[0].name} {row.pipes[0].ratio_mean:.1%}" if row.pipes else ""
    return (f"{row.op_name} ({row.task_type}): {row.task_duration_us} us, block dim "
            f"{row.block_dim}{top}")


def _statistic_feedback(row: OpStatistic) -> str:
    return (f"{row.op_type} ({row.core_type}) x{row.count}: avg {row.avg_us} us "
            f"(min {row.min_us}, max {row.max_us})")


def _triton_feedback(error: TritonAscendError) -> str:
    where = f"{error.location}: " if error.location else ""
    lines = [f"{where}triton-ascend {error.kind}: {error.message or ''}".rstrip()]
    if error.hint:
        lines.append(f"  hint: {error.hint}")
    return "\n".join(lines)


def _console_feedback(console: MsprofConsole) -> str:
    if console.errors:
        return "msprof failed: " + "; ".join(console.errors[:3])
    if console.ok:
        return f"msprof results in {console.output_dir}"
    return "msprof did not finish (no results directory reported)"


def _smi_feedback(info: NpuSmiInfo) -> str:
    names = sorted({chip.name for chip in info.chips})
    return f"npu-smi {info.smi_version}: {info.device_count} device(s) {', '.join(names)}"


def _invocation_feedback(invocation: BishengInvocation) -> str:
    return (f"bisheng {' '.join(invocation.sources)} -> {invocation.output} "
            f"(arch {invocation.arch}, language {invocation.language})")
