"""One package's CPU program: its CPU twin (the driver main) and its kernel, compiled as
C++ against the real devkit headers and linked with the CPU model library.

The kernel is untrusted (a model wrote it), so g++ runs in opbot's sandbox; the package and
the caches are only read there, the output folder is the only one written.

Most of a legacy build is parsing kernel_operator.h in the kernel's translation unit, so
g++ loads it from a precompiled header (runners/ascendc/realapi/pch.py, built outside the
sandbox from trusted inputs, with exactly this build's flags, its folder searched first)
where that cannot change what the build reads: the kernel starts with
`#include "kernel_operator.h"`, the twin's unit does not include it, and no file of the
package (or beside the twin) bears the name of a header the PCH read, which the package's
-I folder would otherwise let shadow it. Otherwise (an ASC package, whose twin starts with
other includes; switched off with OPBOT_REALAPI_PCH=0; not buildable) the build is as
before. The log's include chains are completed alike with the PCH and without it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runners.ascendc.cpumodel import program_cache, twin_cache
from runners.ascendc.cpumodel.errors import CpuModelError
from runners.ascendc.cpumodel.library import LINK_LIBS, Library, prepare_library
from runners.ascendc.cpumodel.run import run_sandboxed
from runners.ascendc.package import PackageError, read_manifest
from runners.ascendc.parsers.compiler import Diagnostic, parse_gnu_output
from runners.ascendc.realapi.names import INTRINSICS
from runners.ascendc.realapi.pch import (
    HEADER,
    PrecompiledHeader,
    compiler_identity,
    invalidate_pch,
    pch_headers,
    prepare_pch,
    real_header,
)
from runners.ascendc.realapi.typecheck import (
    PCH_SUSPECT,
    PCH_UNREADABLE,
    complete_include_chains,
    leading_include_line,
)
from runners.sandbox import read_head

PROGRAM_NAME = "cpu_model_program"
LEGACY_TWIN = "cpu_twin.cpp"
ASC_TWIN = "cpu_twin.asc"
# g++ quotes names with typographic quotes (U+2018/U+2019), GNU ld with `...'.
_OPEN, _CLOSE = "\u2018", "\u2019"
# "undefined reference to `long vexp<half*, ...>(...)'": the generic declaration of an
# intrinsic the model does not implement for these operands (library.py, opbot_cpumodel.h).
_UNDEFINED = re.compile(r"undefined reference to [`'" + _OPEN + r"](?:[\w:<>*, ]+?\s)?"
                        r"(?P<name>[A-Za-z_]\w*)(?=[<('" + _CLOSE + "])")
# An intrinsic the realapi declarations lack, called from the devkit's own headers.
_UNDECLARED = re.compile(r"^(?P<file>[^:\n]+):\d+:\d+: error: (?:" + _OPEN
                         + r"(?P<a>\w+)" + _CLOSE + " was not declared|there are no arguments to "
                         + _OPEN + r"(?P<b>\w+)" + _CLOSE + ")", re.MULTILINE)
_INTRINSIC_NAME = re.compile(r"^(?:v\w+|copy_\w+|set_\w+|get_\w+|conv_\w+|[a-z]+_[a-z0-9_]+)$")
_HEAD_BYTES = 256 * 1024
# (Token pasting could spell any of them: a package that pastes builds without the PCH.)
_SEARCH_PROBES = re.compile(r"has_include|include_next|gch|##")
_MAX_SHADOW_FILES = 2000


@dataclass
class ProgramBuild:
    """The outcome of building one package's CPU program."""

    ok: bool
    program: Path | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    log: str = ""
    unsupported: list[str] = field(default_factory=list)  # intrinsics the model lacks
    seconds: float = 0.0


def unsupported_names(log: str) -> list[str]:
    """The intrinsics a build failed on for want of CPU semantics, each once, first mention
    first: undefined references to declared intrinsics, and intrinsics the devkit's headers
    call that no declaration covers. A kernel's own undefined names are not listed."""
    names: list[str] = []
    for match in _UNDEFINED.finditer(log):
        if match["name"] in INTRINSICS and match["name"] not in names:
            names.append(match["name"])
    for match in _UNDECLARED.finditer(log):
        name = match["a"] or match["b"]
        in_devkit = "/devkit/" in match["file"] or "/impl/" in match["file"]
        if in_devkit and _INTRINSIC_NAME.match(name) and name not in names:
            names.append(name)
    return names


def _package_folder(package: Path) -> Path:
    """The ascendc/ folder holding opbot.json (given it or the op folder above it)."""
    return package / "ascendc" if (package / "ascendc" / "opbot.json").is_file() else package


def _sources(folder: Path, own_twin: Path | None = None) -> tuple[list[str], list[str]]:
    """The g++ inputs for the package's generation: the legacy twin and kernel as two
    translation units; the ASC twin, which includes its .asc kernel, as one, compiled as
    C++ with the twin's OPBOT_CPU_MODEL driver (GmAlloc and ICPU_RUN_KF, no aclrt*).
    Also the package's file names, for the diagnostics."""
    try:
        manifest = read_manifest(folder)
    except (PackageError, OSError, ValueError, KeyError) as exc:
        raise CpuModelError(f"{folder}: not an opbot Ascend C package: {exc}") from exc
    kernel = folder / manifest.kernel
    twin = own_twin or folder / (LEGACY_TWIN if manifest.generation == "legacy" else ASC_TWIN)
    for path in (twin, kernel):
        if not path.is_file():
            raise CpuModelError(f"{folder}: missing {path.name}")
    names = [twin.name, kernel.name]
    if manifest.generation == "legacy":
        return [str(twin), str(kernel)], names
    if "OPBOT_CPU_MODEL" not in twin.read_text(encoding="utf-8", errors="replace"):
        raise CpuModelError(f"{folder}: its {ASC_TWIN} predates the CPU model's driver: "
                            "regenerate the package")
    return ["-x", "c++", "-DOPBOT_CPU_MODEL", str(twin), "-x", "none"], names


def build_program(package: Path, out_dir: Path, *, timeout_s: float = 600,
                  twin: Path | None = None) -> ProgramBuild:
    """Compile the package's twin and kernel into `out_dir`/cpu_model_program.

    `twin`: the CPU twin to build instead of the package's own (the verifier renders one
    from the manifest: a package's twin could compute the outputs itself).
    Raises CpuModelError when the model itself is unavailable (no real sources, library
    build failure); a kernel that does not compile or link is a ProgramBuild with ok=False,
    its diagnostics, and `unsupported` naming the intrinsics the model lacks.
    """
    started = time.monotonic()
    folder = _package_folder(package.resolve())
    sources, user_files = _sources(folder, twin)
    library = prepare_library()
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    program = out_dir / PROGRAM_NAME
    program.unlink(missing_ok=True)
    argv = ["g++", *library.compile_flags(), f"-I{folder}", *sources,
            str(library.archive), *LINK_LIBS, "-o", str(program)]
    # The same inputs compiled before (the package verified again): the kept program.
    shape = [name if not name.startswith("/") else Path(name).name for name in sources]
    key = program_cache.cache_key(folder, twin, [*library.compile_flags(), *shape, *LINK_LIBS],
                                  library.archive)
    cached = _kept_programs(library.root) if key is not None else None
    kept = program_cache.fetch(cached, key, program, folder) if cached and key else None
    if kept is not None:
        return ProgramBuild(ok=True, program=program, log=kept,
                            diagnostics=parse_gnu_output(kept, user_files=user_files).diagnostics,
                            seconds=round(time.monotonic() - started, 2))
    readable = [folder, *library.readable(), *([twin.parent] if twin is not None else [])]
    plan = _pch_plan(folder, twin, library)
    pch = plan.prepare() if plan is not None else None
    deadline = time.monotonic() + timeout_s
    twin_log = ""
    # The twin's object and the like in a folder of this build's own: nothing planted in
    # out_dir (a link, a folder) is written through or stands in the way.
    units = Path(tempfile.mkdtemp(prefix=".units-", dir=out_dir))
    try:
        if not sources[0].startswith("-"):  # legacy: the twin is a unit of its own
            twin_object, failed_log = _twin_object(folder, (Path(sources[0]), Path(sources[1])),
                                                   library, units, readable=readable,
                                                   timeout_s=timeout_s)
            if twin_object is not None:
                argv = [str(twin_object) if item == sources[0] else item for item in argv]
            elif failed_log is not None:
                # The kernel's own diagnostics after the twin's, as one g++ run gave both.
                twin_log = failed_log
                argv = ["g++", *library.compile_flags(), f"-I{folder}", "-c", sources[1], "-o",
                        str(units / "kernel.o")]
            timeout_s = max(1.0, deadline - time.monotonic())
        if plan is not None and pch is not None:
            returncode, log = _compile_with_pch(argv, pch, pch_flags=plan.flags(pch),
                                                program=program, out_dir=out_dir,
                                                readable=readable, timeout_s=timeout_s)
        else:
            returncode, log = _compile(argv, out_dir, readable, timeout_s)
        log = twin_log + log
        if plan is not None:
            log = plan.complete(log)
    finally:  # an exception (a sandbox that cannot start) leaves no folder either
        shutil.rmtree(units, ignore_errors=True)
    ok = returncode == 0 and program.is_file()
    if ok and cached is not None and key is not None:
        program_cache.store(cached, key, program, log, folder)
    report = parse_gnu_output(log, user_files=user_files)
    unsupported = unsupported_names(log) if not ok else []
    if unsupported:
        log = log.rstrip("\n") + "\n" + "".join(
            f"[opbot] unsupported: {name} (the CPU model has no semantics for this intrinsic)\n"
            for name in unsupported)
    return ProgramBuild(ok=ok, program=program if ok else None, diagnostics=report.diagnostics,
                        log=log, unsupported=unsupported,
                        seconds=round(time.monotonic() - started, 2))


def _compile_with_pch(argv: list[str], pch: PrecompiledHeader, *, pch_flags: list[str],
                      program: Path, out_dir: Path, readable: list[Path],
                      timeout_s: float) -> tuple[int | None, str]:
    """`argv` with the PCH's folder searched first; without it when g++ stopped in a way a
    damaged .gch can cause (typecheck.py does the same): that build is the verdict, and the
    PCH goes when it was to blame."""
    # Read-only inside, like everything but the output folder: a kernel cannot replace the
    # .gch that the next build loads.
    returncode, log = _compile([argv[0], *pch_flags, *argv[1:]], out_dir,
                               [*readable, pch.folder], timeout_s)
    if not PCH_SUSPECT.search(log):
        return returncode, log
    program.unlink(missing_ok=True)
    retry = _compile(argv, out_dir, readable, timeout_s)
    if PCH_UNREADABLE.search(log) or not PCH_SUSPECT.search(retry[1]):
        invalidate_pch(pch)
    return retry


def _twin_object(folder: Path, units_in: tuple[Path, Path], library: Library, units: Path,
                 *, readable: list[Path], timeout_s: float) -> tuple[Path | None, str | None]:
    """The legacy twin (of `units_in`: the twin and the kernel) compiled on its own into
    `units` (kept in twin_cache.py for the next kernel of the same package): (its object,
    None); (None, g++'s log) when it does not compile; (None, None) when it cannot be
    tried: the build compiles it as before."""
    twin, kernel = units_in
    compiler = shutil.which("g++")
    identity = compiler_identity(compiler) if compiler is not None else None
    if compiler is None or identity is None:
        return None, None
    folders = [folder] if twin.parent == folder else [folder, twin.parent]
    flags = [*library.compile_flags(), f"-I{folder}"]
    # The package's folder by its place in `folders`, not its path: the next one differs.
    key = twin_cache.twin_key(twin, kernel, folders,
                              [*library.compile_flags(), "-I{folder0}"], identity)
    target = units / "cpu_twin.o"
    kept = _kept_twins(library.root)
    if key is not None and twin_cache.fetch(kept, key, target):
        return target, None
    dependencies = units / "cpu_twin.d"
    returncode, log = _compile(["g++", *flags, "-c", str(twin), "-MD", "-MF",
                                str(dependencies), "-o", str(target)], units, readable,
                               timeout_s)
    if returncode != 0 or not target.is_file():
        target.unlink(missing_ok=True)
        return None, log
    if key is not None:
        twin_cache.store(kept, key, folders, target, dependencies=dependencies, kernel=kernel,
                         trusted=[*library.readable(), Path("/usr")])
    return target, None


@dataclass(frozen=True)
class _PchPlan:
    """How this build may use a PCH, and how its log's include chains are completed
    (applied with the PCH and without, so both read the same)."""

    library: Library
    complete: Callable[[str], str]
    shadowing: frozenset[str]  # _file_names of the folders this build searches

    def prepare(self) -> PrecompiledHeader | None:
        """kernel_operator.h's PCH, built with exactly the build's compile flags."""
        compiler = shutil.which("g++")
        if compiler is None:
            return None
        pch = prepare_pch(compiler, self.library.api, self.library.compile_flags())
        return pch if pch is not None and self._unshadowed(pch) else None

    def flags(self, pch: PrecompiledHeader) -> list[str]:
        """Before the build's own flags: the PCH's folder, searched first."""
        return [f"-I{pch.folder}"]

    def _unshadowed(self, pch: PrecompiledHeader) -> bool:
        """Whether no header the PCH was made from could be found elsewhere in this build."""
        headers = pch_headers(pch)
        return headers is not None and not (_suffixes(headers) & self.shadowing)


def _pch_plan(folder: Path, twin: Path | None, library: Library) -> _PchPlan | None:
    """A PCH's plan for this package, or None where one could change what g++ reads.
    Made whether the PCH is switched on or not: the log is completed alike either way."""
    try:
        manifest = read_manifest(folder)
    except (PackageError, OSError, ValueError, KeyError):
        return None
    if manifest.generation != "legacy":
        return None  # the ASC twin's unit starts with other includes: no PCH can stand in
    kernel = folder / manifest.kernel
    own = twin or folder / LEGACY_TWIN
    kernel_line = leading_include_line(_head(kernel))
    header = real_header(library.api)
    names = _file_names([folder, *([twin.parent] if twin is not None else [])])
    if kernel_line is None or header is None or names is None or HEADER in _head(own) \
            or _probes_the_search(folder):
        return None  # (a twin naming the header: its unit would read the header too)
    return _PchPlan(library, lambda log: complete_include_chains(
        log, str(header), str(kernel), kernel_line), names)


def _probes_the_search(folder: Path) -> bool:
    """Whether a file of the package could tell the PCH's folder is searched (and build
    differently with it): __has_include, #include_next, the .gch named, token pasting; a
    file too big to read cheaply counts as one that could."""
    try:
        paths = sorted(folder.rglob("*"))
    except RecursionError:  # nested too deep to walk: as one that could
        return True
    for path in paths:
        if path.is_symlink() or not path.is_file():
            continue
        if path.stat().st_size > _HEAD_BYTES:
            return True
        joined = _head(path).replace("\\\r\n", "").replace("\\\n", "")  # spliced lines
        if _SEARCH_PROBES.search(joined):
            return True
    return False


def _head(path: Path) -> str:
    return read_head(path, _HEAD_BYTES)


def _file_names(folders: Sequence[Path]) -> frozenset[str] | None:
    """Every path suffix (name, parent/name, ...) of the files under `folders`, which a
    header of the same name or relative path could be shadowed by; None when a folder
    cannot be listed, or holds a link or too many files."""
    names: set[str] = set()
    count = 0
    for top in folders:
        try:
            for root, dirs, files in os.walk(top, followlinks=False,
                                             onerror=_raise):
                for name in (*dirs, *files):
                    path = Path(root) / name
                    if path.is_symlink():
                        return None
                    if name in dirs:
                        continue
                    count += 1
                    if count > _MAX_SHADOW_FILES:
                        return None
                    parts = path.relative_to(top).parts
                    names.update("/".join(parts[index:]) for index in range(len(parts)))
        except (OSError, RecursionError):
            return None
    return frozenset(names)


def _raise(error: OSError) -> None:
    raise error


def _suffixes(headers: frozenset[str]) -> set[str]:
    found: set[str] = set()
    for header in headers:
        for spelled in (header, os.path.normpath(header)):
            parts = [part for part in spelled.split("/") if part]
            found.update("/".join(parts[index:]) for index in range(len(parts)))
    return found


def _kept_programs(library_root: Path) -> Path:
    """Kept programs, beside the library they were linked with."""
    return library_root.parent / f"{library_root.name}-programs"


def _kept_twins(library_root: Path) -> Path:
    """Kept twin objects, beside the library they are linked with."""
    return library_root.parent / f"{library_root.name}-twins"


def _compile(argv: list[str], cwd: Path, readable: list[Path], timeout_s: float
             ) -> tuple[int | None, str]:
    """Run g++ sandboxed; (its exit status, None on timeout; the whole log)."""
    returncode, log = run_sandboxed(argv, cwd, readable, timeout_s, "compile the kernel")
    if returncode is None:
        return None, log + f"\n[opbot] the CPU-model build timed out after {timeout_s:.0f} s\n"
    return returncode, log
