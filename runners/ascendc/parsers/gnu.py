"""The shapes of GNU toolchain and CMake output that clang-style parsing misses.

g++ frames its diagnostics with context lines ("X: In instantiation of '...':", "X:9:15:
required from here", "from X:4,") and echoes source behind a "  12 | " gutter; GNU ld
writes "undefined reference to `sym'" with no "error:" word; collect2 only repeats that ld
failed; CMake writes multi-line "CMake Error at f:12 (cmd):" blocks. These helpers read each
shape into plain values; compiler.py turns them into Diagnostics in log order.

Formats read from real outputs of g++ 12.2, GNU ld 2.40 and CMake 3.25
(tests/data/ascend/own/gnu, see tests/data/ascend/SOURCES.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

# -- g++ ----------------------------------------------------------------------------------------

# "X: In instantiation of 'T':", "X: In member function 'f':", "X: At global scope:".
GXX_CONTEXT = re.compile(
    r"^(?P<file>[^\s:][^:]*): (?P<what>(?:In [a-z ]+?)(?: (?P<name>'.*'))?|At global scope"
    r"|At top level):$")
# "X:9:15:   required from 'T'", "...required from here", "...in 'constexpr' expansion of".
GXX_FRAME = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+):\s{2,}"
    r"(?P<what>(?:recursively )?required (?:from|by) .*|in 'constexpr' expansion of .*)$")
# The continuation lines of a g++ include chain: "                 from X:4,".
GXX_INCLUDED_FROM = re.compile(r"^\s+from (?P<file>.+?):(?P<line>\d+)[:,]$")
GXX_ECHO = re.compile(r"^\s*\d+ \| ?(?P<text>.*)$")
GXX_CARET = re.compile(r"^\s*\|\s*[~^]+[\s~^+]*$")


def plain_quotes(text: str) -> str:
    """g++ quotes with U+2018/U+2019 under a UTF-8 locale, with ' under C: read both alike."""
    return text.replace("\u2018", "'").replace("\u2019", "'")


def is_instantiation(context: str | None) -> bool:
    return context is not None and context.startswith(("In instantiation of",
                                                        "In substitution of"))


_FRAME_PLACE = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+)(?::(?P<col>\d+):| \()")


def frame_place(frame: str) -> tuple[str, int, int | None] | None:
    """The file, line and column a context frame names: g++'s "X:9:15: required from ..."
    or a CMake call-stack frame "CMakeLists.txt:11 (include)"."""
    match = _FRAME_PLACE.match(frame)
    if match is None:
        return None
    return match["file"], int(match["line"]), int(match["col"]) if match["col"] else None


# -- where a file belongs: the user's package or the toolchain ---------------------------------

# CANN/devkit and system locations: an error reported there is caused by the user's code
# that instantiated or included it, so the user's frame is the place to report.
_SYSTEM_PATH = re.compile(
    r"(?:^|/)(?:Ascend|ascend-toolkit|tikcpp|tikcfw|ascendc_kernel_cmake)/"
    r"|(?:^|/)cann(?:-[\w.]+)?/|^/usr/(?:include|lib|lib64|share|local/include)/"
    r"|/include/c\+\+/|^<")


def is_user_file(path: str, user_files: Collection[str] | None = None) -> bool:
    """Whether `path` is the user's (the package's) file rather than a CANN/system header.

    With `user_files` (the package's file names), a file is the user's when its name is one
    of them; without, when its path is outside the known toolchain locations.
    """
    if _SYSTEM_PATH.search(path):
        return False
    if user_files is None:
        return True
    names = {PurePath(name).name for name in user_files}
    return PurePath(path).name in names


# -- GNU ld and collect2 -----------------------------------------------------------------------

# "/usr/bin/ld: ", "aarch64-linux-gnu-ld: ", "ld.bfd: " (ld.lld is clang's: compiler.py).
LD_PREFIX = re.compile(r"^(?P<tool>(?:\S*/)?(?:[\w.+]+-)?ld(?:\.bfd|\.gold)?): (?P<rest>.*)$")
_LD_IN_FUNCTION = re.compile(r"^(?P<object>.+?): in function [`'](?P<function>.+)':$")
_LD_UNDEFINED = re.compile(r"^(?P<where>.+?): undefined reference to [`'](?P<symbol>.+)'$")
_LD_MULTIPLE = re.compile(
    r"^(?P<where>.+?): multiple definition of [`'](?P<symbol>.+?)'"
    r"(?:; (?P<first>.+?): first defined here)?$")
_LD_CANNOT_FIND = re.compile(r"^cannot find (?P<library>\S+?)(?:: (?P<why>.+))?$")
_LD_SOURCE = re.compile(
    r"(?P<file>[^:\s]+\.(?:c|cc|cpp|cxx|c\+\+|asc|cce|h|hh|hpp))(?::(?P<line>\d+))?(?=:|$)")
COLLECT2 = re.compile(r"^collect2: (?:fatal )?error: (?P<tool>\S+) returned (?P<code>\d+) "
                      r"exit status$")


@dataclass
class LdMessage:
    """One GNU ld message: what failed, on which symbol or library, and where."""

    what: str  # "undefined", "multiple", "cannot_find", "in_function", "other"
    text: str
    tool: str | None = None
    symbol: str | None = None
    file: str | None = None
    line: int | None = None
    where: str | None = None  # the object/source position as ld printed it
    also: str | None = None  # multiple definition: where the first definition is


def ld_source(where: str) -> tuple[str | None, int | None]:
    """The source file and line in an ld position ("main.cpp:9", "a.o:a.cpp:(.text+0x0)")."""
    match = _LD_SOURCE.search(where)
    if match is None:
        return None, None
    return match["file"], int(match["line"]) if match["line"] else None


def read_ld_line(stripped: str) -> LdMessage | None:
    """A GNU ld line: with its "ld: " prefix, or an undefined/multiple line without one."""
    prefix = LD_PREFIX.match(stripped)
    # "/usr/bin/ld" and a bare line are the same linker: name it "ld" (or its own name).
    tool = PurePath(prefix["tool"]).name if prefix else "ld"
    rest = prefix["rest"] if prefix else stripped
    rest = plain_quotes(rest)
    for what, pattern in (("undefined", _LD_UNDEFINED), ("multiple", _LD_MULTIPLE)):
        match = pattern.match(rest)
        if match is not None:
            file, line = ld_source(match["where"])
            return LdMessage(what, rest, tool, match["symbol"], file, line, match["where"],
                             match.groupdict().get("first"))
    if prefix is None:
        return None
    function = _LD_IN_FUNCTION.match(rest)
    if function is not None:
        return LdMessage("in_function", rest, tool, function["function"],
                         where=function["object"])
    missing = _LD_CANNOT_FIND.match(rest)
    if missing is not None:
        return LdMessage("cannot_find", rest, tool, symbol=missing["library"])
    return LdMessage("other", rest, tool)


# -- CMake ---------------------------------------------------------------------------------------

_CMAKE_HEAD = re.compile(
    r"^CMake (?P<sev>Error|Warning|Deprecation Error|Deprecation Warning)(?: \(dev\))?"
    r"(?: at (?P<file>.+?):(?P<line>\d+) \((?P<command>[^)]*)\))?(?: in (?P<in>.+?))?"
    r":(?: (?P<msg>.*))?$")
_CMAKE_FRAME = re.compile(r"^\s+(?P<file>.+?):(?P<line>\d+) \((?P<command>[^)]*)\)$")
_CALL_STACK = "Call Stack (most recent call first):"


@dataclass
class CMakeBlock:
    """One "CMake Error/Warning" block: where, in which command, the message, the stack."""

    severity: str  # "error" or "warning"
    message: str
    file: str | None = None
    line: int | None = None
    command: str | None = None
    call_stack: list[tuple[str, int, str]] = field(default_factory=list)
    end: int = 0  # the index of the first line after the block


def read_cmake_block(lines: Sequence[str], index: int) -> CMakeBlock | None:
    """The CMake message block that starts at lines[index], or None."""
    head = _CMAKE_HEAD.match(lines[index].strip())
    if head is None:
        return None
    body: list[str] = [head["msg"]] if head["msg"] else []
    position = index + 1
    # The message is indented; blank lines may sit inside it.
    while position < len(lines) and (not lines[position].strip()
                                      or lines[position][:1].isspace()):
        body.append(lines[position].strip())
        position += 1
    stack: list[tuple[str, int, str]] = []
    if position < len(lines) and lines[position].strip() == _CALL_STACK:
        position += 1
        while position < len(lines) and (frame := _CMAKE_FRAME.match(lines[position])):
            stack.append((frame["file"], int(frame["line"]), frame["command"]))
            position += 1
    message = _join_message([part for part in body if part])
    return CMakeBlock(severity="error" if "Error" in head["sev"] else "warning",
                      message=message, file=head["file"] or head["in"],
                      line=int(head["line"]) if head["line"] else None,
                      command=head["command"], call_stack=stack, end=position)


def _join_message(parts: list[str]) -> str:
    """CMake wraps its prose at ~75 columns: one line again, single-spaced."""
    return re.sub(r"\s+", " ", " ".join(parts)).strip()
