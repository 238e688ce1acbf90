"""Type-check an Ascend C kernel against the real devkit headers: g++ -fsyntax-only in the
CPU-debug configuration, inside the sandbox (the kernel is untrusted: an `#include` of a
secret would put it into the error text).

The real headers reject what bisheng rejects in a kernel's own API use: unknown APIs (with
g++'s "did you mean"), wrong parameter structs, dtype mismatches, a Cast without a round
mode, a queue on a position that has no AllocTensor. The low-level intrinsics behind the API
are declared loosely (standins.py), so their arguments are not checked; nor is the ASC host
side (`<<<>>>`), which only bisheng parses: an asc package is checked by its kernel file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runners.ascendc.package import MANIFEST, PackageError, read_manifest
from runners.ascendc.parsers.compiler import Diagnostic, parse_compiler_output
from runners.ascendc.realapi.pch import (
    HEADER,
    PrecompiledHeader,
    invalidate_pch,
    prepare_pch,
    real_header,
)
from runners.ascendc.realapi.sources import RealApi, RealApiUnavailable, prepare_real_api
from runners.sandbox import (
    ProcessOutcome,
    SandboxUnavailableError,
    private_workdir,
    run_isolated,
    sandbox_environment,
)

__all__ = ["REUSED_NOTE", "Generation", "TypecheckResult", "gxx_command", "pch_flags",
           "relocate_to_kernel", "split_standin_gaps", "typecheck_package", "typecheck_source"]

Generation = Literal["legacy", "asc"]

# g++ stops after this many errors, which bounds the log. An error in a template counts once
# per instantiation (a float and a half kernel: twice), so a few mistakes need ~30.
MAX_ERRORS = 50
LOG_LIMIT_CHARS = 60_000
# What is copied from a kernel's folder into the private work folder (its own headers).
_SOURCE_SUFFIXES = (".h", ".hpp", ".hh", ".inc", ".inl", ".cpp", ".cc", ".cxx", ".asc")
_MAX_COPIED_FILES = 200
_MAX_COPIED_BYTES = 2 * 1024 * 1024
_SKIPPED_FOLDERS = frozenset({".git", "build", "out", "__pycache__", "node_modules"})
# g++'s instantiation backtrace: "file:line:col:   required from ..." (and "from here").
_REQUIRED_FROM = re.compile(r"^(?P<file>\S[^:]*?):(?P<line>\d+):(?P<col>\d+):\s+required from")
# g++ could not load the .gch it chose (a truncated file), or crashed (a damaged one can
# make cc1plus crash). Neither can be written by a kernel: its #error reads "error: #error".
PCH_UNREADABLE = re.compile(r"^\S+:\d+: fatal error: can(?:not|'t) read PCH file",
                             re.MULTILINE)
PCH_SUSPECT = re.compile(PCH_UNREADABLE.pattern + r"|^(?:\S+: )?internal compiler error: "
                          r"|^\S+:\d+:\d+: internal compiler error: ", re.MULTILINE)
# How g++ prints where a header was included from: the first step, then each further one.
_CHAIN_FIRST = "In file included from "
_CHAIN_NEXT = " " * 17 + "from "
# A kernel's first line of code when a PCH can stand for it.
_LEADING_INCLUDE = r'#\s*include\s*(?:"{name}"|<{name}>)\s*(?://.*|/\*.*?\*/\s*)?$'
_HEAD_BYTES = 256 * 1024  # how much of a kernel is read to find its first include
_DIAG_HEAD = re.compile(r"^(?P<file>\S[^:]*?):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: ")


@dataclass
class TypecheckResult:
    """How the type-check went. `skipped` set: nothing was checked (ok is True then)."""

    ok: bool
    diagnostics: list[Diagnostic]
    log: str
    seconds: float
    command: list[str]
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)  # what the check could not cover

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "diagnostics": [item.to_json() for item in self.diagnostics],
                "log": self.log, "seconds": round(self.seconds, 3), "command": self.command,
                "skipped": self.skipped, "notes": self.notes}


def _skipped(reason: str) -> TypecheckResult:
    return TypecheckResult(ok=True, diagnostics=[], log="", seconds=0.0, command=[],
                           skipped=reason)


def _failed(message: str, *, file: str | None = None, log: str = "", seconds: float = 0.0,
            command: Sequence[str] = ()) -> TypecheckResult:
    diagnostic = Diagnostic(severity="error", message=message, file=file, kind="tool",
                            tool="g++")
    return TypecheckResult(ok=False, diagnostics=[diagnostic], log=log or message,
                           seconds=seconds, command=list(command))


# -- the command line -----------------------------------------------------------------------


def gxx_command(compiler: str, api: RealApi, source: str,
                include: Sequence[Path] = (), pch: Path | None = None) -> list[str]:
    """g++ as the CPU-debug build would compile the kernel, stopping after the type check.

    `.asc` is C++ to g++ (-x c++); -w because only errors reject a kernel and the real
    headers warn a lot; no line-number gutter, so the echoed source line and its caret read
    as clang prints them (runners/ascendc/parsers/compiler.py). `pch`: the folder holding
    kernel_operator.h.gch (pch.py), searched first so that g++ finds it before the header.
    """
    command = [compiler, "-std=c++17", "-fsyntax-only", "-x", "c++", "-w",
               "-fdiagnostics-color=never", "-fno-diagnostics-show-line-numbers",
               f"-fmax-errors={MAX_ERRORS}"]
    command += [f"-D{define}" for define in api.defines()]
    if pch is not None:
        command.append(f"-I{pch}")
    # The real headers first: a kernel's folder holding a header named like one of them
    # must not replace it. The kernel's own folder is searched first for "..." includes
    # anyway.
    command += [f"-I{folder}" for folder in api.include_dirs()]
    command += [f"-I{folder}" for folder in include]
    return [*command, source]


def pch_flags(api: RealApi) -> list[str]:
    """What decides how kernel_operator.h parses, as gxx_command passes it: the flags its
    precompiled header is built with and keyed on."""
    return ["-std=c++17", *(f"-D{define}" for define in api.defines()),
            *(f"-I{folder}" for folder in api.include_dirs())]


# -- running it -----------------------------------------------------------------------------


def typecheck_source(kernel: Path, *, generation: Generation, api: RealApi | None = None,
                     include: Sequence[Path] = (), timeout_s: float = 180,
                     reuse_passed: bool = False) -> TypecheckResult:
    """Type-check one kernel source (`.cpp` legacy, `.asc` asc) against the real headers.

    Never raises for a user problem: absent sources give a skipped result, a missing file,
    a timeout or compiler errors give ok=False with diagnostics. `reuse_passed`: a pass of
    exactly these inputs earlier in this process (also asked with reuse_passed) answers.
    """
    if generation not in ("legacy", "asc"):
        return _failed(f"unknown toolchain generation {generation!r} (legacy or asc)")
    if api is None:
        try:
            api = prepare_real_api()
        except RealApiUnavailable as exc:
            return _skipped(str(exc))
    if kernel.name.startswith("-"):
        # g++ would read it as an option ("--version" checks nothing and exits 0).
        return _failed(f"the kernel source {kernel.name!r} starts with '-': rename it",
                       file=kernel.name)
    if not kernel.is_file():
        return _failed(f"the kernel source {kernel} does not exist", file=kernel.name)
    compiler = shutil.which("g++")
    if compiler is None:
        return _skipped("g++ is not installed (apt-get install g++): the real-header "
                        "type-check needs it")
    try:
        return _run(kernel, compiler, api, [path.resolve() for path in include],
                    timeout_s=timeout_s, reuse_passed=reuse_passed)
    except OSError as exc:  # no room for the private work folder, say
        return _failed(f"the type-check could not be set up: {exc}")


def _run(kernel: Path, compiler: str, api: RealApi, include: Sequence[Path], *,
         timeout_s: float, reuse_passed: bool) -> TypecheckResult:
    with private_workdir("opbot-realapi-") as tmp:
        work = tmp / "work"
        work.mkdir()
        # Only the kernel's folder (its own headers) goes in; the compiler runs on the copy,
        # so what it names is the kernel's own relative path.
        _copy_sources(kernel.parent, work)
        # The kernel itself whatever its suffix; the caller named it (typecheck_package has
        # checked that it resolves inside the package).
        shutil.copyfile(kernel, work / kernel.name)
        # A kernel folder with a kernel_operator.h of its own: g++ reads that one first.
        line = None if (work / HEADER).exists() else _leading_include(work / kernel.name)
        pch = None if line is None or include else \
            prepare_pch(compiler, api, pch_flags(api))
        check = _Check(tmp, kernel.name, compiler, api, include, timeout_s, line)
        key = _passed_key(check, pch) if reuse_passed and not include else None
        with _PASSED_LOCK:
            kept = _PASSED.get(key) if key is not None else None
        if kept is not None:
            return kept.again()
        result = _checked(check, pch)
        if key is not None and result.ok and result.skipped is None:
            with _PASSED_LOCK:  # a scan checks two operators at once
                _PASSED[key] = _Passed(_copy(result))  # never the caller's own object
                while len(_PASSED) > _PASSED_KEPT:
                    del _PASSED[next(iter(_PASSED))]
        return result


def _checked(check: _Check, pch: PrecompiledHeader | None) -> TypecheckResult:
    result = check.run(pch)
    if pch is None or not PCH_SUSPECT.search(result.log):
        return result
    # g++ stopped in a way a damaged .gch can cause (one damaged since this process
    # checked its digest: pch.py). The check without it is the verdict, whatever the
    # cause; the PCH goes when it was to blame.
    retry = check.run(None)
    if PCH_UNREADABLE.search(result.log) or not PCH_SUSPECT.search(retry.log):
        invalidate_pch(pch)
    return retry


# -- checks that passed, kept for this process ----------------------------------------------
#
# A generation type-checks its draft before the build (the precheck), and the verification
# checks the same files again: the second answer is the first (both ask with reuse_passed).
# Kept by everything the check reads: the command, the kernel folder's copied files, the
# compiler binary and the PCH file as they are now; only passes (a failure costs the loop
# its next draft anyway).

_PASSED_KEPT = 64
REUSED_NOTE = "the same sources passed this check earlier in this process: that verdict"


@dataclass(frozen=True)
class _Passed:
    result: TypecheckResult

    def again(self) -> TypecheckResult:
        answer = _copy(self.result)
        answer.seconds = 0.0
        answer.notes.append(REUSED_NOTE)
        return answer


def _copy(result: TypecheckResult) -> TypecheckResult:
    return dataclasses.replace(result, command=list(result.command),
                               diagnostics=list(result.diagnostics), notes=list(result.notes))


_PASSED: dict[str, _Passed] = {}
_PASSED_LOCK = threading.Lock()


def _passed_key(check: _Check, pch: PrecompiledHeader | None) -> str | None:
    """What the check reads, digested; None when part of it cannot be read."""
    digest = hashlib.sha256(b"opbot-typecheck-passed-2")

    def field(kind: bytes, value: str | bytes) -> None:
        # Each field with its kind and length: no two different inputs read alike (a
        # file's bytes may hold NULs, names and contents run into each other otherwise).
        data = value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")
        digest.update(kind + len(data).to_bytes(8, "big") + data)

    for item in check.command(pch):
        field(b"a", item)
    files = [os.path.realpath(check.compiler)]
    if pch is not None:
        files.append(str(pch.folder / f"{HEADER}.gch"))
    try:
        for name in files:
            info = Path(name).stat()
            field(b"s", f"{name}\0{info.st_ino}\0{info.st_size}\0{info.st_mtime_ns}")
        work = check.tmp / "work"
        for root, folders, names in os.walk(work):
            folders.sort()
            field(b"d", str(Path(root).relative_to(work)))  # empty folders count too
            for name in sorted(names):
                path = Path(root) / name
                field(b"n", str(path.relative_to(work)))
                field(b"f", path.read_bytes())
    except (OSError, RecursionError):
        return None
    return digest.hexdigest()


def _leading_include(source: Path) -> int | None:
    """leading_include_line of the kernel's copy (its head: the include comes first)."""
    try:
        with source.open("rb") as handle:
            head = handle.read(_HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    return leading_include_line(head)


def leading_include_line(text: str, header: str = HEADER) -> int | None:
    """The line of `#include "kernel_operator.h"` (or <...>; or of another `header`) when it
    is the first thing in the source, comments and blank lines aside; None otherwise.
    Conservative: a line continuation or anything else before it gives None.

    Only for such a kernel is the PCH used: g++ can then load it at that include alone,
    which is what complete_include_chains relies on. Kernels that start otherwise, and
    checks given include folders of their own (searched after the real headers', which
    could see them: __has_include), read the header text as before."""
    leading = re.compile(_LEADING_INCLUDE.format(name=re.escape(header)))
    in_comment = False
    for number, line in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        if line.endswith("\\"):
            return None  # a spliced line: not worth reading like the preprocessor does
        rest = line
        while True:
            if in_comment:
                end = rest.find("*/")
                if end < 0:
                    break
                rest, in_comment = rest[end + 2:], False
            rest = rest.strip()
            if rest.startswith("/*"):
                rest, in_comment = rest[2:], True
                continue
            if not rest or rest.startswith("//"):
                break
            return number if leading.match(rest) else None
    return None


@dataclass(frozen=True)
class _Check:
    """One kernel's g++ run in its private work folder (tmp/work), with or without the PCH."""

    tmp: Path
    source: str  # the kernel's name in the work folder
    compiler: str
    api: RealApi
    include: Sequence[Path]
    timeout_s: float
    include_line: int | None  # leading_include_line of the kernel

    def command(self, pch: PrecompiledHeader | None) -> list[str]:
        return gxx_command(self.compiler, self.api, self.source, self.include,
                           None if pch is None else pch.folder)

    def run(self, pch: PrecompiledHeader | None) -> TypecheckResult:
        api, work = self.api, self.tmp / "work"
        command = self.command(pch)
        log_path = self.tmp / ("gxx.log" if pch is None else "gxx-pch.log")
        readable = [api.root, *self.include]
        if pch is not None:
            # Read-only inside, like everything outside the work folder: a kernel cannot
            # replace the .gch that the next check loads.
            readable.append(pch.folder)
        try:
            outcome = run_isolated(
                command, cwd=work, timeout_s=self.timeout_s, log_path=log_path,
                # C locale: plain ASCII quotes in messages, as the parsers expect.
                env=sandbox_environment(work, {"LC_ALL": "C", "LANG": "C"}),
                readable=readable)
        except SandboxUnavailableError as exc:
            return _skipped(f"the sandbox cannot start, and a kernel is compiled only "
                            f"inside it: {exc}")
        except OSError as exc:
            return _failed(f"g++ could not be started in the sandbox: {exc}", command=command)
        log = _read_log(log_path, self._complete) or self._complete(outcome.log_tail)
        return _verdict(outcome, log, command=command, source=self.source, api=api,
                        timeout_s=self.timeout_s)


    def _complete(self, log: str) -> str:
        """With the PCH or without, the same log: the PCH must not change a result."""
        header = real_header(self.api)
        if self.include_line is None or header is None:
            return log
        return complete_include_chains(log, str(header), self.source, self.include_line)


def complete_include_chains(log: str, header: str, source: str, line: int) -> str:
    """The real headers' "In file included from" chains, each to the kernel's #include.

    Loaded from a PCH, they end at kernel_operator.h, the PCH's own main file; read from
    text, g++ 12 goes on to the kernel's line, but not always (a chain through
    kernel_operator.h:29 stops there, for one). `header` is kernel_operator.h as g++ names
    it; a chain that ends there gets its last step, `source`:`line`, so a check prints
    the same with the PCH and without, and a header error keeps its way to the kernel."""
    lines = log.splitlines(keepends=True)
    completed: list[str] = []
    in_chain = False
    for text in lines:
        body = text.rstrip("\n")
        in_chain = body.startswith(_CHAIN_FIRST) or (in_chain and body.startswith(_CHAIN_NEXT))
        prefix = _CHAIN_FIRST if body.startswith(_CHAIN_FIRST) else _CHAIN_NEXT
        entry = body[len(prefix):] if in_chain else ""
        if in_chain and entry.endswith(":") and entry[:-1].rpartition(":")[0] == header:
            completed.append(f"{body[:-1]},\n{_CHAIN_NEXT}{source}:{line}:"
                             f"{text[len(body):]}")
            in_chain = False
            continue
        completed.append(text)
        if in_chain and entry.endswith(":"):
            in_chain = False  # the chain's last entry: a diagnostic follows
    return "".join(completed)


def _verdict(outcome: ProcessOutcome, log: str, *, command: list[str], source: str,
             api: RealApi, timeout_s: float) -> TypecheckResult:
    if outcome.timed_out:
        return _failed(f"g++ did not finish the type check within {timeout_s:g} s (deep or "
                       "endless template recursion in the kernel?); nothing was checked",
                       file=source, log=log, seconds=outcome.seconds, command=command)
    diagnostics, missing = split_standin_gaps(parse_compiler_output(log), api)
    errors = [item for item in relocate_to_kernel(diagnostics, log, api)
              if item.severity == "error"]
    notes = [] if not missing else [
        f"opbot's stand-in declarations lack the intrinsic(s) {', '.join(missing)}, which "
        "the real headers call for this kernel: a gap in this check, not an error in the "
        "kernel (add them to runners/ascendc/realapi/names.py)"]
    if outcome.returncode != 0 and not errors and not missing:
        reason = outcome.killed_because or outcome.signal_name or \
            f"exit status {outcome.returncode}"
        last = next((line for line in reversed(log.splitlines()) if line.strip()), "")
        errors = [Diagnostic(severity="error", kind="tool", tool="g++",
                             message=f"g++ failed ({reason}): {last[:300]}".rstrip(": "))]
    return TypecheckResult(ok=not errors, diagnostics=errors, log=log,
                           seconds=outcome.seconds, command=command, notes=notes)


def _read_log(path: Path, complete: Callable[[str], str] | None = None) -> str:
    """The head of g++'s log (the first errors matter most), bounded. The log lies outside
    the sandbox's writable folder, so it is ours, but it is still never followed.
    `complete` edits it before the cut, so that the cut falls in the same place whether
    g++ printed each include chain whole or not (complete_include_chains)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        data = os.read(fd, LOG_LIMIT_CHARS * 2)
    except OSError:
        return ""
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    if complete is not None:
        text = complete(text)
    if len(text) > LOG_LIMIT_CHARS:
        text = text[:LOG_LIMIT_CHARS] + "\n[... log cut ...]\n"
    return text


def _source_files(folder: Path) -> Iterator[Path]:
    """The kernel folder's source files, no symlinks, no build trees, bounded."""
    count = 0
    for root, folders, files in os.walk(folder, followlinks=False):
        folders[:] = sorted(name for name in folders if name not in _SKIPPED_FOLDERS)
        for name in sorted(files):
            path = Path(root) / name
            if not name.endswith(_SOURCE_SUFFIXES):
                continue
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_size <= _MAX_COPIED_BYTES:
                yield path
                count += 1
                if count >= _MAX_COPIED_FILES:
                    return


def _copy_sources(folder: Path, work: Path) -> None:
    for path in _source_files(folder):
        target = work / path.relative_to(folder)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target, follow_symlinks=False)
        except OSError:
            continue  # unreadable: the compiler then says which include it misses


# -- g++'s errors inside the real headers ---------------------------------------------------

# An intrinsic the real headers call that our stub_fun.h does not declare (names.py).
_UNDECLARED_INTRINSIC = re.compile(
    r"^'(?P<name>[a-z_][a-z0-9_]*)' was not declared in this scope"
    r"|^there are no arguments to '(?P<name2>[a-z_][a-z0-9_]*)' that depend on")


def split_standin_gaps(diagnostics: list[Diagnostic],
                       api: RealApi) -> tuple[list[Diagnostic], list[str]]:
    """Errors that are ours, not the kernel's: a real header calling a low-level intrinsic
    our stand-in does not declare. They are taken out (so a valid kernel is not rejected
    for opbot's gap) and the names returned, to be reported as a gap in the check."""
    kept: list[Diagnostic] = []
    missing: list[str] = []
    for diagnostic in diagnostics:
        match = _UNDECLARED_INTRINSIC.search(diagnostic.message)
        if match is None or diagnostic.file is None or \
                not _in_real_headers(diagnostic.file, api):
            kept.append(diagnostic)
            continue
        name = match["name"] or match["name2"]
        if name not in missing:
            missing.append(name)
    return kept, sorted(missing)


def relocate_to_kernel(diagnostics: list[Diagnostic], log: str,
                       api: RealApi) -> list[Diagnostic]:
    """An error g++ reports inside a real header (a static_assert in the API's
    implementation, a call with the wrong argument types) is caused by a kernel line that
    g++ names in its "required from" backtrace before the error. Point such an error at
    that kernel line, the place to fix, and keep the header's location as a note."""
    frames = _kernel_frames(log, api)
    for diagnostic in diagnostics:
        if diagnostic.file is None or diagnostic.line is None or \
                not _in_real_headers(diagnostic.file, api):
            continue
        frame = frames.get((diagnostic.file, diagnostic.line, diagnostic.column))
        if frame is None:
            continue
        header = Diagnostic(severity="note", message=f"reported inside the real Ascend C "
                            f"headers: {diagnostic.message}", file=diagnostic.file,
                            line=diagnostic.line, column=diagnostic.column,
                            source_line=diagnostic.source_line)
        diagnostic.file, diagnostic.line, diagnostic.column = frame
        diagnostic.source_line = None
        asserted = _failed_assertion(diagnostic)
        if asserted is not None:
            diagnostic.message = f"the real API's check fails: {asserted} ({diagnostic.message})"
        diagnostic.notes.insert(0, header)
    for diagnostic in diagnostics:
        for item in (diagnostic, *diagnostic.notes):
            if item.file is not None and _in_real_headers(item.file, api):
                item.file = os.path.normpath(item.file)  # drop the headers' "../../"
    return diagnostics


def _failed_assertion(diagnostic: Diagnostic) -> str | None:
    """The ASSERT(...) line of the API's implementation that stopped the constant
    evaluation (a queue on GM, say): the clearest statement of what the kernel broke."""
    for note in diagnostic.notes:
        if "in expansion of macro 'ASSERT'" in note.message and note.source_line:
            return note.source_line.strip().rstrip(";")
    return None


def _in_real_headers(file: str, api: RealApi) -> bool:
    return file.startswith(str(api.root))


def _kernel_frames(log: str, api: RealApi) -> dict[tuple[str, int, int | None],
                                                    tuple[str, int, int]]:
    """For each error line in a header: the kernel location of the outermost "required
    from" frame printed before it (the kernel's own call), if any."""
    found: dict[tuple[str, int, int | None], tuple[str, int, int]] = {}
    pending: tuple[str, int, int] | None = None
    for line in log.splitlines():
        stripped = line.strip()
        frame = _REQUIRED_FROM.match(stripped)
        if frame is not None and not _in_real_headers(frame["file"], api):
            # The last kernel frame before the error is the outermost: g++ prints the
            # chain innermost first, ending with "required from here".
            pending = (frame["file"], int(frame["line"]), int(frame["col"]))
            continue
        head = _DIAG_HEAD.match(stripped)
        if head is not None:
            if pending is not None and _in_real_headers(head["file"], api):
                found.setdefault((head["file"], int(head["line"]), int(head["col"])),
                                 pending)
            pending = None
    return found


# -- packages -------------------------------------------------------------------------------


def typecheck_package(folder: Path, *, timeout_s: float = 180,
                      reuse_passed: bool = False) -> TypecheckResult:
    """Type-check the kernel of an opbot Ascend C package (the op folder or its ascendc/
    folder with opbot.json naming the kernel and its generation). For an asc package only
    the kernel file is checked: its host side (`<<<>>>`) needs bisheng. `reuse_passed`: as
    typecheck_source's."""
    try:
        manifest = read_manifest(folder)
    except (PackageError, OSError, ValueError, KeyError, TypeError) as exc:
        return _failed(f"{folder} is not a readable opbot Ascend C package: {exc}")
    package = folder / "ascendc" if (folder / "ascendc" / MANIFEST).is_file() else folder
    kernel = package / manifest.kernel
    try:
        inside = kernel.resolve().is_relative_to(package.resolve())
    except (OSError, RuntimeError):
        inside = False
    except ValueError:  # a lone surrogate, say
        return _failed(f"{MANIFEST} names a kernel no file can be named: {manifest.kernel!r}")
    if not inside:
        return _failed(f"{MANIFEST} names a kernel outside the package: {manifest.kernel!r}")
    result = typecheck_source(kernel, generation=manifest.generation, timeout_s=timeout_s,
                              reuse_passed=reuse_passed)
    if manifest.generation == "asc" and result.skipped is None:
        result.notes.append("asc package: the kernel file was checked; the host side "
                            "(<<<>>> launches) needs bisheng")
    return result

