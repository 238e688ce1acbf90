"""Where the real Ascend C sources come from, and their one-time preparation into a cache.

The sources are CANN's devkit headers (asc-devkit) and the open CPU-debug library
(asc-tools/cpudebug), as two tarballs `asc-devkit-<commit>.tar.xz` and
`asc-tools-<commit>.tar.xz` or as the two unpacked trees, in a folder named by
OPBOT_ASCEND_REAL_API, else in `shared/data/ascend-real` beside the checkout. They are under
the CANN Open Software License: they are unpacked at run time into the user's cache, never
copied into the repository. Preparing adds the generated `kernel_tiling.h` and our own
stand-ins for the binary-only headers (runners/ascendc/realapi/standins.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners.ascendc.realapi.standins import declarations_header, standin_files

__all__ = ["CPU_DEFINES", "ENV_VARIABLE", "RealApi", "RealApiStatus", "RealApiUnavailable",
           "cache_dir", "declarations_header", "prepare_real_api", "real_api_status"]

ENV_VARIABLE = "OPBOT_ASCEND_REAL_API"
_DEVKIT = "asc-devkit"
_TOOLS = "asc-tools"
_TARBALL = re.compile(r"^(?P<kind>asc-devkit|asc-tools)-(?P<commit>[0-9a-fA-F]{6,40})\.tar\.xz$")
# What marks an unpacked tree as the right one (a folder named asc-devkit[-<commit>]).
_DEVKIT_MARK = Path("include") / "kernel_operator.h"
_TOOLS_MARK = Path("cpudebug") / "include"
_TILING_SCRIPT = Path("impl") / "adv_api" / "cmake" / "scripts" / "gen_kernel_tiling_data_def.py"
_READY = ".opbot-ready"  # written last: a folder without it is half-built
# Bump when the layout of the prepared folder changes (the hash covers our headers' text).
_LAYOUT_VERSION = "1"
_TILING_TIMEOUT_S = 120.0
_LEFTOVER_AGE_S = 3600.0
# A cache folder nobody used for two weeks (another version's) goes when a new one is built.
UNUSED_AGE_S = 14 * 24 * 3600.0
_CACHED_PREFIX = "devkit-"  # what every folder of these caches is named from

# The defines of the CPU-debug build for dav-2201 (Atlas A2 / 910B vector core), from the
# devkit's unit-test CMake and cpudebug/CMakeLists.txt (docs/ascend-toolchain.md).
CPU_DEFINES: tuple[str, ...] = (
    "ASCENDC_CPU_DEBUG=1", "ASCENDC_DEBUG=1", "ASCENDC_DUMP=0", "__CCE_KT_TEST__=1",
    "__NPU_ARCH__=2201", "__CCE_AICORE__=220", "__DAV_C220__", "__DAV_C220_VEC__",
    "__DAV_VEC__", "_GLIBCXX_USE_CXX11_ABI=0",
)


class RealApiUnavailable(Exception):
    """The real sources are absent or cannot be prepared; str() says what to do."""


@dataclass(frozen=True)
class RealApiStatus:
    """Whether the real sources can be used here, and where they come from."""

    available: bool
    reason: str | None
    source: str | None
    devkit_commit: str | None
    tools_commit: str | None

    def to_json(self) -> dict[str, Any]:
        return {"available": self.available, "reason": self.reason, "source": self.source,
                "devkit_commit": self.devkit_commit, "tools_commit": self.tools_commit}


@dataclass(frozen=True)
class RealApi:
    """The prepared sources: unpacked trees, generated headers, and how to compile with them."""

    root: Path
    devkit: Path
    tools: Path
    generated: Path
    devkit_commit: str
    tools_commit: str

    def include_dirs(self) -> list[Path]:
        """In g++'s search order. The cpudebug headers come first: they define the CPU-mode
        types (half, bfloat16_t) and qualifiers the devkit headers expect to find."""
        devkit = self.devkit
        return [self.tools / "include", devkit, devkit / "include",
                devkit / "include" / "basic_api", devkit / "include" / "utils",
                devkit / "impl", devkit / "impl" / "basic_api", self.generated]

    def defines(self) -> list[str]:
        return list(CPU_DEFINES)


# -- finding the sources --------------------------------------------------------------------


@dataclass(frozen=True)
class _Found:
    """One source (the devkit or the tools): a tarball or an unpacked tree, and its commit."""

    path: Path
    commit: str
    is_tree: bool


def _repo_root() -> Path:
    # runners/ascendc/realapi/sources.py -> the checkout's root
    return Path(__file__).resolve().parents[3]


def _configured() -> tuple[Path | None, str]:
    """The folder to look in and how it was chosen; None when nothing is configured."""
    given = os.environ.get(ENV_VARIABLE, "").strip()
    if given:
        return Path(given).expanduser(), f"env {ENV_VARIABLE}"
    beside = _repo_root().parent / "shared" / "data" / "ascend-real"
    if beside.is_dir():
        return beside, "beside the checkout"
    return None, ""


def _find(folder: Path, kind: str) -> _Found | None:
    """The tarball `<kind>-<commit>.tar.xz` (the last by name if several), else a tree
    named `<kind>` or `<kind>-<commit>`."""
    try:
        entries = sorted(folder.iterdir(), reverse=True)
    except OSError:
        return None
    for entry in entries:
        match = _TARBALL.match(entry.name)
        if match is not None and match["kind"] == kind and entry.is_file():
            return _Found(entry, match["commit"][:7].lower(), is_tree=False)
    mark = _DEVKIT_MARK if kind == _DEVKIT else _TOOLS_MARK
    for entry in entries:
        named = entry.name == kind or entry.name.startswith(kind + "-")
        if named and (entry / mark).exists():
            suffix = entry.name[len(kind) + 1:]
            return _Found(entry, suffix[:7].lower() if suffix else "tree", is_tree=True)
    return None


def _locate() -> tuple[RealApiStatus, _Found | None, _Found | None]:
    folder, how = _configured()
    if folder is None:
        return RealApiStatus(
            False, f"the real Ascend C sources are not configured: set {ENV_VARIABLE} to a "
            "folder holding asc-devkit-<commit>.tar.xz and asc-tools-<commit>.tar.xz",
            None, None, None), None, None
    source = f"{folder} ({how})"
    if not folder.is_dir():
        return RealApiStatus(False, f"{folder} ({how}) is not a folder: set {ENV_VARIABLE} "
                             "to the folder holding the asc-devkit and asc-tools tarballs",
                             source, None, None), None, None
    devkit, tools = _find(folder, _DEVKIT), _find(folder, _TOOLS)
    if devkit is None or tools is None:
        missing = [name for name, found in ((_DEVKIT, devkit), (_TOOLS, tools)) if not found]
        wanted = " and ".join(f"{name}-<commit>.tar.xz" for name in missing)
        return RealApiStatus(False, f"{folder} ({how}) has no {wanted} (nor an unpacked "
                             f"tree): put them there or point {ENV_VARIABLE} elsewhere",
                             source, devkit.commit if devkit else None,
                             tools.commit if tools else None), devkit, tools
    return RealApiStatus(True, None, source, devkit.commit, tools.commit), devkit, tools


def real_api_status() -> RealApiStatus:
    """Whether the real sources are there (cheap: looks at names only; never raises)."""
    try:
        return _locate()[0]
    except Exception as exc:  # noqa: BLE001 - a status is asked for, never a traceback
        return RealApiStatus(False, f"the real Ascend C sources could not be looked up: "
                             f"{exc}", None, None, None)


# -- the cache ------------------------------------------------------------------------------


def cache_dir() -> Path:
    """opbot's cache: OPBOT_CACHE_DIR, else $XDG_CACHE_HOME/opbot, else ~/.cache/opbot."""
    given = os.environ.get("OPBOT_CACHE_DIR", "").strip()
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "opbot"


def _generated_hash(devkit: _Found, tools: _Found) -> str:
    """Keys the cache on our headers (a changed name list means a new folder) and, for
    unpacked trees that carry no commit, on where they are and when they last changed."""
    digest = hashlib.sha256(_LAYOUT_VERSION.encode())
    for name, text in sorted(standin_files().items()):
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    for found in (devkit, tools):
        if found.is_tree:
            with contextlib.suppress(OSError):
                digest.update(f"{found.path.resolve()}:{found.path.stat().st_mtime_ns}".encode())
    return digest.hexdigest()[:12]


def _is_ready(root: Path) -> bool:
    return (root / _READY).is_file()


def _api_at(root: Path, devkit: _Found, tools: _Found) -> RealApi:
    return RealApi(root=root, devkit=root / "devkit", tools=root / "tools",
                   generated=root / "generated", devkit_commit=devkit.commit,
                   tools_commit=tools.commit)


def prepare_real_api() -> RealApi:
    """Unpack the sources into the cache once and generate our headers there.

    Several processes may prepare at once: each builds in a temporary folder beside the
    final one and renames it into place; the first rename wins and the others drop theirs.
    Raises RealApiUnavailable (with what to do) when the sources are absent or broken.
    """
    status, devkit, tools = _locate()
    if not status.available or devkit is None or tools is None:
        raise RealApiUnavailable(status.reason or "the real Ascend C sources are unavailable")
    parent = cache_dir() / "ascend-real"
    name = f"devkit-{devkit.commit}_tools-{tools.commit}_{_generated_hash(devkit, tools)}"
    final = parent / name
    if _is_ready(final):
        mark_used(final)
        return _api_at(final, devkit, tools)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        _sweep_leftovers(parent)
        building = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    except OSError as exc:
        raise RealApiUnavailable(f"cannot write the cache folder {parent}: {exc.strerror or exc}"
                                 f" (set OPBOT_CACHE_DIR to a writable folder)") from exc
    try:
        _build(building, devkit, tools)
        publish_folder(building, final, _is_ready)
        prune_unused(parent, final)
    except OSError as exc:  # a full disk, a read-only cache, a vanished source tree
        raise RealApiUnavailable(f"cannot prepare the real sources in {parent}: {exc}") from exc
    finally:
        shutil.rmtree(building, ignore_errors=True)
    if not _is_ready(final):
        raise RealApiUnavailable(f"the prepared sources at {final} are incomplete: remove "
                                 "that folder and try again")
    return _api_at(final, devkit, tools)


def _sweep_leftovers(parent: Path) -> None:
    """Temporary folders of preparations that were killed midway; an hour is far longer
    than a preparation takes, so one still running is never touched."""
    limit = time.time() - _LEFTOVER_AGE_S
    mounted = _mount_points()
    for entry in parent.glob(".devkit-*"):
        with contextlib.suppress(OSError):
            if entry.is_dir() and not entry.is_symlink() and entry.stat().st_mtime < limit:
                _remove_folder(entry, mounted)


def mark_used(folder: Path) -> None:
    """Note that a cache folder was used now (its mtime): `prune_unused` keeps it."""
    with contextlib.suppress(OSError):  # a read-only cache is used all the same
        os.utime(folder)


def prune_unused(parent: Path, keep: Path, max_age_s: float = UNUSED_AGE_S) -> None:
    """Remove the folders beside `keep` that nothing used for `max_age_s`: the builds for
    earlier sources, another compiler or other flags (a CANN upgrade leaves ~200 MB PCHs
    and libraries behind), and what a killed build left.

    Only names this cache gives (`devkit-...`, `.devkit-...`), only plain folders on the
    cache's own file system with no mount inside (a link or a mount is never entered); a
    folder's companions (`<name>-programs`, `<name>-twins`) go with it and stay with it;
    lock files stay (a waiter may hold one). A folder is looked at again just before it
    goes (a use since the listing keeps it) and renamed away first, so a process that finds
    it meanwhile sees it unready and builds it again rather than read half of it."""
    limit = time.time() - max_age_s
    try:
        if parent.is_symlink():
            return
        device = parent.stat().st_dev
        names = [entry.name for entry in parent.iterdir()
                 if entry.name.lstrip(".").startswith(_CACHED_PREFIX)]
    except OSError:
        return
    mounted = _mount_points()
    if mounted is None:
        return  # cannot tell where mounts are: nothing is deleted
    folders = [name for name in names if _plain_folder(parent / name, device) is not None]
    for name in folders:
        if name == keep.name or name.startswith(f"{keep.name}-"):
            continue
        # A companion is as used as the folder it belongs to (while that is there), each
        # looked at just before it goes: a use since the listing keeps it.
        owners = [owner for owner in folders if name.startswith(f"{owner}-")] or [name]
        now = [_plain_folder(parent / owner, device) for owner in owners]
        if not any(info is not None and info.st_mtime >= limit for info in now):
            _remove_folder(parent / name, mounted)


def _plain_folder(path: Path, device: int) -> os.stat_result | None:
    """`path`'s status if it is a folder (not a link) on `device`."""
    try:
        info = path.lstat()
    except OSError:
        return None  # (gone since the listing: another process's build or prune)
    return info if stat.S_ISDIR(info.st_mode) and info.st_dev == device else None


def _mount_points() -> list[str] | None:
    """Where file systems are mounted (/proc/self/mountinfo), or None when unknown."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    points = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:  # the fifth is the mount point, with \040-style escapes
            points.append(re.sub(r"\\([0-7]{3})", lambda code: chr(int(code[1], 8)),
                                 fields[4]))
    return points


def _remove_folder(path: Path, mounted: list[str] | None) -> None:
    """Delete a cache folder: never one with a mount inside; renamed away first (a reader
    then finds nothing rather than half), unless it is such a leftover already."""
    if mounted is None:
        return
    inside = os.path.realpath(path) + "/"
    if any(point.startswith(inside) for point in mounted):
        return
    doomed = path
    if ".stale-" not in path.name:
        doomed = path.with_name(f".{path.name.lstrip('.')}.stale-{os.getpid()}")
    try:
        if doomed != path:
            path.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    except (OSError, RecursionError):  # (a folder nested too deep for rmtree)
        return


def publish_folder(building: Path, final: Path, ready: Callable[[Path], bool]) -> None:
    """Rename a finished cache folder into place (callers hold the folder's lock, or race
    harmlessly): losing to another process that finished first (`ready(final)`) is fine,
    and whatever else is there (a half-built folder left by a crash, one whose marker was
    dropped) is replaced."""
    try:
        building.rename(final)
        return
    except OSError:
        if ready(final):
            return  # another process finished first
    stale = final.with_name(f".{final.name}.stale-{os.getpid()}")
    with contextlib.suppress(OSError):
        final.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    with contextlib.suppress(OSError):
        building.rename(final)


def _build(building: Path, devkit: _Found, tools: _Found) -> None:
    _install(devkit, building / "devkit", inner=Path())
    _install(tools, building / "tools", inner=Path("cpudebug"))
    generated = building / "generated"
    for relative, text in standin_files().items():
        target = generated / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    _generate_tiling(building / "devkit", generated / "kernel_tiling" / "kernel_tiling.h")
    (building / _READY).write_text(
        f"devkit {devkit.commit} ({devkit.path.name})\ntools {tools.commit} "
        f"({tools.path.name})\n", encoding="utf-8")


def _install(found: _Found, target: Path, *, inner: Path) -> None:
    """Put the tree's `inner` folder (cpudebug for the tools) at `target`."""
    if found.is_tree:
        source = found.path / inner
        try:
            shutil.copytree(source, target, symlinks=True)
        except (OSError, shutil.Error) as exc:
            raise RealApiUnavailable(f"cannot copy {source} into the cache: {exc}") from exc
        return
    unpacked = target.with_name(target.name + ".unpack")
    _unpack(found.path, unpacked)
    tops = [entry for entry in unpacked.iterdir() if entry.is_dir()]
    if len(tops) != 1 or not (tops[0] / inner).is_dir():
        raise RealApiUnavailable(f"{found.path.name} does not hold one top folder with "
                                 f"{inner or 'the sources'} inside: is it the right tarball?")
    (tops[0] / inner).rename(target)
    shutil.rmtree(unpacked, ignore_errors=True)


def _unpack(tarball: Path, into: Path) -> None:
    into.mkdir(parents=True)
    try:
        with tarfile.open(tarball, "r:xz") as archive:
            if hasattr(tarfile, "data_filter"):
                # No absolute paths, no links out of the folder, no device files.
                archive.extractall(into, filter="data")
            else:  # Python before 3.10.12 / 3.11.4
                archive.extractall(into)  # noqa: S202 - a configured, trusted archive
    except (OSError, tarfile.TarError, EOFError, ValueError) as exc:
        raise RealApiUnavailable(f"cannot unpack {tarball}: {exc}") from exc


def _generate_tiling(devkit: Path, output: Path) -> None:
    """kernel_tiling.h is generated from the devkit's *_tilingdata.h by its own script."""
    script = devkit / _TILING_SCRIPT
    if not script.is_file():
        raise RealApiUnavailable(f"the devkit has no {_TILING_SCRIPT}: is it the right "
                                 "asc-devkit?")
    try:
        done = subprocess.run(
            [sys.executable, str(script), str(devkit / "include" / "adv_api"), str(output)],
            capture_output=True, text=True, errors="replace", timeout=_TILING_TIMEOUT_S,
            check=False, cwd=devkit)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RealApiUnavailable(f"the devkit's {script.name} did not run: {exc}") from exc
    if done.returncode != 0 or not output.is_file():
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise RealApiUnavailable(f"the devkit's {script.name} failed: {said[:300]}")
