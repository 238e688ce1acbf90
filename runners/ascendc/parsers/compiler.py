"""Build logs -> located diagnostics with hints; bisheng command lines.

One pass reads bisheng/clang, ld.lld, g++, GNU ld, collect2 and CMake messages in log order
(the GNU and CMake shapes are read by gnu.py). An error reported inside a CANN or system
header moves to the user's line that led there (the header's place is kept as `origin`),
and errors that only follow from an earlier one (same line, same template instantiation,
a CMake command left undefined by a failed include) are grouped under it as `follow_ons`.

Formats read from real outputs (tests/data/ascend/, see its SOURCES.md).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from runners.ascendc.parsers import gnu
from runners.ascendc.parsers.common import JsonResult, to_int

Severity = Literal["error", "warning", "note"]
DiagnosticKind = Literal["compile", "link", "backend", "tool"]


@dataclass
class Diagnostic(JsonResult):
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
    # Where the compiler reported it when that was inside a CANN/system header and the
    # location above was moved to the user's line (with the header's echoed source line).
    origin: str | None = None
    origin_source_line: str | None = None
    # g++'s "In function '...'" / "In instantiation of '...'" and its "required from" frames.
    context: list[str] = field(default_factory=list)
    follow_ons: list[Diagnostic] = field(default_factory=list)  # errors this one caused

    @property
    def location(self) -> str | None:
        if self.file is None:
            return None
        parts = [self.file] + [str(n) for n in (self.line, self.column) if n is not None]
        return ":".join(parts)


@dataclass
class CompilerReport(JsonResult):
    """Everything a failed build log says: diagnostics plus the counts and targets around them."""

    diagnostics: list[Diagnostic]
    errors_generated: int | None = None  # the sum of clang's "N errors generated." lines
    failed_targets: list[str] = field(default_factory=list)  # make targets that failed first


_DIAG = re.compile(
    r"^(?P<file>\S[^:]*?):(?P<line>\d+)(?::(?P<col>\d+))?: "
    r"(?P<sev>fatal error|error|warning|note|remark): (?P<msg>.*)$")
_BACKEND = re.compile(
    r"^(?:(?P<tool>[\w.+-]+): )?(?:fatal error: error in backend|LLVM ERROR): (?P<msg>.*)$")
_TOOL = re.compile(
    r"^(?P<tool>ld\.lld|lld|ld|cceld|bisheng|ccec|clang\+\+|clang|ascendc_compiler|g\+\+|gcc"
    r"|c\+\+|cc1plus|cc1): "
    r"(?P<sev>fatal error|error|warning): (?P<msg>.*)$")
_REFERENCED_BY = re.compile(r"^>>> referenced by (?P<ref>.+)$")
_INCLUDED_FROM = re.compile(r"^In file included from (?P<file>.+?):(?P<line>\d+)[:,]$")
_ERRORS_GENERATED = re.compile(r"^(?P<n>\d+) errors? generated\.?$")
_CARET = re.compile(r"^[\s~^]*\^[\s~^]*$")
_MAKE_ERROR = re.compile(
    r"^g?make(?:\[\d+\])?: \*\*\* \[(?:[^\]]*?:\d+: )?(?P<target>[^\]]+)\] Error (?P<code>\d+)")
_PROGRESS = re.compile(r"^\[\s*\d+%\] ")  # CMake's "[ 33%] Building CXX object ..."
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


def parse_compiler_output(text: str, user_files: Collection[str] | None = None
                          ) -> list[Diagnostic]:
    """The diagnostics in a build log, first-seen order, notes and follow-on errors grouped."""
    return parse_compiler_report(text, user_files).diagnostics


def parse_compiler_report(text: str, user_files: Collection[str] | None = None
                          ) -> CompilerReport:
    """Everything a build log (bisheng, clang, ld.lld, g++, GNU ld, collect2, CMake) says.

    `user_files`: the package's file names; an error inside any other file (a CANN or
    system header) is reported at the user's line that led there. Without it, files
    outside the known toolchain locations count as the user's.
    """
    lines = text.splitlines()
    state = _DiagState()
    for index, raw in enumerate(lines):
        state.feed(lines, index, raw)
    diagnostics = state.finish(text)
    for diagnostic in diagnostics:
        _prefer_user_location(diagnostic, user_files)
        diagnostic.hint = _compiler_hint(diagnostic)
    diagnostics = group_follow_ons(diagnostics)
    return CompilerReport(diagnostics, state.errors_generated, state.failed_targets)


def parse_gnu_output(text: str, user_files: Collection[str] | None = None) -> CompilerReport:
    """g++ / GNU ld / collect2 / CMake output (a type-check or CPU-debug build): the same
    reading as parse_compiler_report, named for callers that run the GNU toolchain."""
    return parse_compiler_report(text, user_files)


def first_errors(report: CompilerReport | Sequence[Diagnostic]) -> list[Diagnostic]:
    """The root errors, in log order (follow-ons stay under their cause)."""
    items = report.diagnostics if isinstance(report, CompilerReport) else report
    return [item for item in items if item.severity == "error"]


class _DiagState:
    """The line-by-line grouping of a compiler log (one pass, no look-behind but the echo)."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.head: Diagnostic | None = None  # the error (or orphan note) that notes attach to
        self.includes: list[str] = []
        self.errors_generated: int | None = None
        self.failed_targets: list[str] = []
        self.gcc_chain_start: int | None = None  # where a g++ "from X:N," run inserts
        self.context: str | None = None  # g++'s current "In function/instantiation" line
        self.frames: list[str] = []  # its "required from" frames
        self.ld_function: str | None = None  # GNU ld's "in function `f':" for the next line
        self.skip_to = 0  # lines up to here belong to a block already read (CMake)

    def feed(self, lines: Sequence[str], index: int, raw: str) -> None:
        stripped = raw.strip()
        if not stripped or index < self.skip_to:
            return
        if _PROGRESS.match(stripped) or _MAKE_ERROR.match(stripped):
            # Another translation unit (or the end of one): g++'s context does not carry over.
            self.context, self.frames = None, []
        for handler in (self._gxx_context, self._gxx_frame, self._gxx_included_from,
                        self._clang, self._backend, self._collect2, self._tool,
                        self._gnu_ld, self._cmake, self._referenced_by,
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
        message = gnu.plain_quotes(match["msg"].strip())
        context = [self.context, *self.frames] if self.context else list(self.frames)
        diagnostic = Diagnostic(
            severity="error" if severity == "fatal error" else _severity(severity),
            message=message, file=match["file"], line=int(match["line"]),
            column=to_int(match["col"]), fatal=severity == "fatal error",
            source_line=_source_echo(lines, index, raw), include_chain=self.includes,
            context=context)
        self.includes = []
        self.gcc_chain_start = None
        self._add(diagnostic)
        return True

    def _gxx_context(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        match = gnu.GXX_CONTEXT.match(gnu.plain_quotes(stripped))
        if match is None:
            return False
        # Holds for every diagnostic until the next context line (g++ prints it once).
        self.context, self.frames = match["what"], []
        return True

    def _gxx_frame(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        if gnu.GXX_FRAME.match(stripped) is None:
            return False
        self.frames = [*self.frames, re.sub(r"\s{2,}", " ", gnu.plain_quotes(stripped))]
        return True

    def _gxx_included_from(self, lines: Sequence[str], index: int, raw: str,
                           stripped: str) -> bool:
        match = gnu.GXX_INCLUDED_FROM.match(raw)
        if match is None or self.gcc_chain_start is None:
            return False
        # g++ lists the chain innermost first; keep it outermost first, as clang prints it.
        self.includes = [*self.includes]
        self.includes.insert(self.gcc_chain_start, f"{match['file']}:{match['line']}")
        return True

    def _collect2(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        match = gnu.COLLECT2.match(stripped)
        if match is None:
            return False
        # collect2 only says the linker failed: the linker's own lines before it are the cause.
        if not any(d.kind == "link" for d in self.diagnostics):
            self._add(Diagnostic(severity="error", kind="link", tool="collect2",
                                 message=f"{match['tool']} returned {match['code']} exit "
                                 "status (the linker's own messages are not in the log)"))
        return True

    def _gnu_ld(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        message = gnu.read_ld_line(stripped)
        if message is None:
            return False
        if message.what == "in_function":
            self.ld_function = message.symbol
            return True
        referrer = self.ld_function
        self.ld_function = None
        if message.what == "undefined":
            self._ld_undefined(message, referrer)
        elif message.what == "multiple":
            self._add(Diagnostic(
                severity="error", kind="link", tool=message.tool or "ld",
                message=f"multiple definition of '{message.symbol}'"
                + (f" (first defined at {message.also})" if message.also else ""),
                file=message.file, line=message.line, symbol=message.symbol))
        elif message.what == "cannot_find":
            self._add(Diagnostic(severity="error", kind="link", tool=message.tool or "ld",
                                 message=f"cannot find {message.symbol}",
                                 symbol=message.symbol))
        elif message.text.startswith("warning:"):
            self._add(Diagnostic(severity="warning", kind="link", tool=message.tool,
                                 message=message.text.removeprefix("warning:").strip()))
        else:
            self._add(Diagnostic(severity="error", kind="link", tool=message.tool,
                                 message=message.text.removeprefix("error:").strip()))
        return True

    def _ld_undefined(self, message: gnu.LdMessage, referrer: str | None) -> None:
        symbol = message.symbol or ""
        place = message.where or ""
        reference = f"{place} (in {referrer})" if referrer else place
        # ld repeats the symbol for every call site: one diagnostic, every site listed.
        known = next((d for d in self.diagnostics if d.kind == "link" and d.symbol == symbol
                      and d.message.startswith("undefined reference")), None)
        if known is not None:
            known.referenced_by.append(reference)
            return
        self._add(Diagnostic(severity="error", kind="link", tool=message.tool or "ld",
                             message=f"undefined reference to '{symbol}'", symbol=symbol,
                             file=message.file, line=message.line,
                             referenced_by=[reference] if reference else []))

    def _cmake(self, lines: Sequence[str], index: int, raw: str, stripped: str) -> bool:
        block = gnu.read_cmake_block(lines, index)
        if block is None:
            return False
        self.skip_to = block.end
        context = [f"{file}:{line} ({command})" for file, line, command in block.call_stack]
        self._add(Diagnostic(
            severity="error" if block.severity == "error" else "warning", kind="tool",
            tool="cmake", message=block.message, file=block.file, line=block.line,
            symbol=block.command, context=context))
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
        # A trailing comma: g++'s chain goes on with "from" lines, each one level further out.
        self.gcc_chain_start = len(self.includes) - 1 if stripped.endswith(",") else None
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
        wrapper.file, wrapper.line = first_file, to_int(first_line)
        self.includes = []


def _severity(text: str) -> Severity:
    if text in ("error", "warning", "note"):
        return text  # type: ignore[return-value]
    return "note"  # clang's "remark" is informational


def _source_echo(lines: Sequence[str], index: int, raw: str) -> str | None:
    """The source line clang echoes under a diagnostic (the line before the ^~~ caret);
    g++ puts "  12 | " before the echo and "     | " before the caret."""
    if index + 2 >= len(lines):
        return None
    gutter = gnu.GXX_ECHO.match(lines[index + 1])
    if gutter is not None and gnu.GXX_CARET.match(lines[index + 2]):
        return gutter["text"].rstrip() or None
    if not _CARET.match(lines[index + 2]):
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


def _user_frames(diagnostic: Diagnostic) -> list[tuple[str, int | None, int | None]]:
    """The places that led to a diagnostic, nearest the error first: g++'s "required from"
    frames, clang's "in instantiation ... requested here" notes, then the include chain."""
    places: list[tuple[str, int | None, int | None]] = []
    for frame in diagnostic.context:
        place = gnu.frame_place(frame)
        if place is not None:
            places.append(place)
    places += [(note.file, note.line, note.column) for note in diagnostic.notes
               if note.file and "requested here" in note.message]
    for entry in reversed(diagnostic.include_chain):  # the chain is outermost first
        file, _, line = entry.rpartition(":")
        places.append((file, to_int(line), None))
    return places


def _prefer_user_location(diagnostic: Diagnostic, user_files: Collection[str] | None) -> None:
    """An error inside a CANN/system header: report the user's line that led there."""
    # A note heading its own group (a cut log) keeps its place: it is no error to move.
    movable = diagnostic.severity != "note" and (diagnostic.kind == "compile"
                                                 or diagnostic.tool == "cmake")
    if diagnostic.file is None or not movable or gnu.is_user_file(diagnostic.file, user_files):
        return
    place = next((item for item in _user_frames(diagnostic)
                  if gnu.is_user_file(item[0], user_files)), None)
    if place is None:
        return
    diagnostic.origin, diagnostic.origin_source_line = diagnostic.location, \
        diagnostic.source_line
    diagnostic.file, diagnostic.line, diagnostic.column = place
    diagnostic.source_line = None


def _instantiation_key(diagnostic: Diagnostic) -> tuple[str, ...] | None:
    if not diagnostic.context or not gnu.is_instantiation(diagnostic.context[0]):
        return None
    return tuple(diagnostic.context)


def _caused_by(diagnostic: Diagnostic, head: Diagnostic) -> bool:
    """Whether `diagnostic` only follows from the earlier error `head`."""
    if diagnostic.file is not None and (diagnostic.file, diagnostic.line) == (head.file,
                                                                              head.line):
        return diagnostic.kind == head.kind
    key = _instantiation_key(diagnostic)
    if key is not None and key == _instantiation_key(head):
        return True
    # A failed include()/find_package() leaves the commands it would define unknown.
    return (diagnostic.tool == head.tool == "cmake"
            and diagnostic.message.startswith("Unknown CMake command")
            and head.symbol in ("include", "find_package"))


def group_follow_ons(diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
    """One root cause, one entry: errors that follow from an earlier error (same file and
    line, same template instantiation, a CMake command a failed include left undefined)
    go under it as follow_ons. Order is kept; warnings are never grouped."""
    kept: list[Diagnostic] = []
    heads: list[Diagnostic] = []
    for diagnostic in diagnostics:
        if diagnostic.severity == "error":
            cause = next((head for head in heads if _caused_by(diagnostic, head)), None)
            if cause is not None:
                cause.follow_ons.append(diagnostic)
                continue
            heads.append(diagnostic)
        kept.append(diagnostic)
    return [_deliberate_first(item) for item in kept]


def _deliberate_first(head: Diagnostic) -> Diagnostic:
    """A static_assert in the group is the API's own check, worded for the user: it leads."""
    if head.message.startswith("static assertion failed") or not head.follow_ons:
        return head
    chosen = next((item for item in head.follow_ons
                   if item.message.startswith("static assertion failed")), None)
    if chosen is None:
        return head
    rest = [item for item in head.follow_ons if item is not chosen]
    head.follow_ons = []
    chosen.follow_ons = [head, *rest]
    chosen.hint = chosen.hint or _compiler_hint(chosen)
    return chosen


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
                 _hint_undefined_symbol, _hint_backend, _hint_cut_log, _hint_gnu_link,
                 _hint_cmake, _hint_static_assert, _hint_did_you_mean):
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
    if diagnostic.kind != "link" or not diagnostic.symbol or not diagnostic.message.startswith(
            "undefined"):
        return None
    if diagnostic.symbol.startswith("acl"):
        return (f"'{diagnostic.symbol}' is an ACL runtime function: link the runtime "
                "(target_link_libraries ... ascendcl) and include acl/acl.h instead of "
                "declaring it yourself (a C++ declaration gets the wrong, mangled name).")
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



def _hint_gnu_link(diagnostic: Diagnostic, undeclared: re.Match[str] | None) -> str | None:
    if diagnostic.kind != "link" or not diagnostic.symbol:
        return None
    if diagnostic.message.startswith("multiple definition"):
        return (f"'{diagnostic.symbol}' is defined in more than one object: a function or "
                "variable defined in a header that several .cpp files include. Mark it inline "
                "(or static), or define it in one .cpp and only declare it in the header.")
    if diagnostic.message.startswith("cannot find -l"):
        name = diagnostic.symbol.removeprefix("-l")
        return (f"lib{name} is not on the link path. Link CANN libraries from "
                "$ASCEND_HOME_PATH/lib64 (never a hard-coded ascend-toolkit/latest); CANN 8.5 "
                "renamed libaclnn_* to libopapi_*; link only the libraries the build route "
                "documents.")
    return None


def _hint_cmake(diagnostic: Diagnostic, undeclared: re.Match[str] | None) -> str | None:
    if diagnostic.tool != "cmake":
        return None
    message = diagnostic.message
    package = re.search(r'provided by "(?P<name>[^"]+)"', message)
    if package is not None and package["name"] == "ASC":
        return ("find_package(ASC) is the CANN 9 ASC CMake language, which this CANN does not "
                "provide: use the ascendc.cmake route (include(${ASCENDC_CMAKE_DIR}/"
                "ascendc.cmake) + ascendc_library) for CANN < 9, or point CMAKE_PREFIX_PATH "
                "at $ASCEND_HOME_PATH on CANN 9.")
    if package is not None:
        return (f"CMake found no {package['name']} package: add its install prefix to "
                f"CMAKE_PREFIX_PATH or set {package['name']}_DIR.")
    if "include could not find requested file" in message:
        empty = re.search(r"file: /[\w.-]+\.cmake$", message)
        why = (" The path starts at '/': the variable before it is empty, so none of the "
               "probed CANN locations exists." if empty else "")
        return ("A CANN CMake file is missing at that path." + why + " Derive it from "
                "ASCEND_CANN_PACKAGE_PATH=$ASCEND_HOME_PATH (CANN 8.5 moved ascend-toolkit/latest "
                "to cann/).")
    if message.startswith("Unknown CMake command"):
        return ("The command comes from a CANN CMake file that was not included: fix the first "
                "CMake error (the include or find_package) and this one goes away.")
    return None


def _hint_static_assert(diagnostic: Diagnostic,
                        undeclared: re.Match[str] | None) -> str | None:
    if not diagnostic.message.startswith("static assertion failed") or diagnostic.origin is None:
        return None
    return ("A CANN API rejected this call at compile time (see its message): change the "
            "dtypes or arguments on your line, not the header.")


def _hint_did_you_mean(diagnostic: Diagnostic, undeclared: re.Match[str] | None) -> str | None:
    member = re.search(r"'(?P<name>[^']+)' is not a member of '(?P<scope>[^']+)'",
                       diagnostic.message)
    if diagnostic.suggestion is not None:
        quoted = re.search(r"'(?P<name>[^']+)'", diagnostic.message)
        name = quoted["name"] if quoted else "this name"
        return (f"'{name}' does not exist here; the compiler suggests "
                f"'{diagnostic.suggestion}' (a typo, or the name this CANN version uses).")
    if member is not None and member["scope"] == "AscendC":
        return (f"This CANN's AscendC has no '{member['name']}': check the API name and the "
                "header in the installed CANN version's documentation.")
    return None

# -- bisheng command lines ---------------------------------------------------------------------


@dataclass
class BishengInvocation(JsonResult):
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
