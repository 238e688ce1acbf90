"""A GCC precompiled header (PCH) of the real kernel_operator.h for the real-API type-check.

Parsing kernel_operator.h is most of a type-check (~4.4 of ~5.1 s); with a PCH g++ loads
that parse instead (~0.7 s a check). The PCH is made from trusted inputs only (the prepared
real headers and our flags, never a kernel's text), so it is built outside the sandbox, as
the CPU model's library is (runners/ascendc/cpumodel/library.py): once per real sources,
flags and compiler, into opbot's cache, under a lock, in a temporary folder renamed into
place, a ready marker written last. The sandbox only reads it (its root is read-only).

It never changes a verdict: g++ uses a PCH only where it is valid (kernel_operator.h the
first include, no macro defined before it that the headers read, the same flags and the
same compiler) and reads the header text otherwise. Whatever fails in building or finding
it, the check runs as it did without one.

Each PCH records which headers its build read (`pch_headers`), so a caller that searches
more folders than the PCH's build did (the CPU model's build adds the package's) can tell
whether one of them could hold a header of the same name.

The CPU model's legacy builds (runners/ascendc/cpumodel/program.py) use a PCH of their own,
made with their flags.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runners.ascendc.realapi.sources import (
    RealApi,
    cache_dir,
    mark_used,
    prune_unused,
    publish_folder,
)

__all__ = ["BUILD_TIMEOUT_S", "HEADER", "SWITCH", "PrecompiledHeader", "invalidate_pch",
           "pch_enabled", "pch_headers", "prepare_pch", "real_header"]

SWITCH = "OPBOT_REALAPI_PCH"  # 0: no PCH (to compare timings, or to debug)
HEADER = "kernel_operator.h"
BUILD_TIMEOUT_S = 120.0
_GCH = f"{HEADER}.gch"
# Bump when the folder's layout changes.
_LAYOUT_VERSION = "1"
_READY = ".opbot-ready"  # JSON: the .gch's size and digest; written last (absent: unfinished)
# The folder g++ searches first holds the .gch alone: the marker beside it would otherwise
# be something a kernel could #include.
_INCLUDE = "include"
_CACHE_FOLDER = "realapi-pch"


@dataclass(frozen=True)
class PrecompiledHeader:
    """A ready PCH: `folder` (to be searched first, -I) holds kernel_operator.h.gch alone;
    `header` is the real kernel_operator.h it was made from, named as g++ names it."""

    folder: Path
    header: Path


def pch_enabled() -> bool:
    return os.environ.get(SWITCH, "").strip() != "0"


def prepare_pch(compiler: str, api: RealApi, flags: Sequence[str],
                timeout_s: float = BUILD_TIMEOUT_S) -> PrecompiledHeader | None:
    """A ready `kernel_operator.h.gch` for these flags (-std, -D, -I: the ones that decide
    how the header parses) and this compiler, built first when missing. None, never an
    exception, when switched off or when it cannot be built."""
    if not pch_enabled():
        return None
    header = real_header(api)
    identity = compiler_identity(compiler)
    if header is None or identity is None:
        return None
    final = cache_dir() / _CACHE_FOLDER / _key(api, flags, identity)
    if _ready(final):
        mark_used(final)
        return PrecompiledHeader(final / _INCLUDE, header)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(final.parent / f".{final.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        # One build at a time: a second process (a test worker) waits for the first one's
        # PCH instead of spending ~7 s and ~200 MB on the same one beside it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _ready(final):
            _build_and_publish(final, [compiler, *flags], header, timeout_s)
    except OSError:
        return None
    finally:
        os.close(lock)  # releases the lock
    return PrecompiledHeader(final / _INCLUDE, header) if _ready(final) else None


def invalidate_pch(pch: PrecompiledHeader) -> None:
    """Drop a PCH g++ could not load (damaged in the cache): the next check rebuilds it.
    Only its ready marker goes now; a check loading it meanwhile keeps its file."""
    final = pch.folder.parent
    if pch.folder.name != _INCLUDE or final.parent.name != _CACHE_FOLDER:
        return  # not one of ours: never remove what this module did not make
    with contextlib.suppress(OSError):
        (final / _READY).unlink()


def pch_headers(pch: PrecompiledHeader) -> frozenset[str] | None:
    """The headers its build read (g++ -H), as g++ named them; None when not recorded."""
    try:
        recorded = json.loads((pch.folder.parent / _READY).read_text(encoding="utf-8"))
        headers = recorded["headers"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(headers, list) or not all(isinstance(item, str) for item in headers):
        return None
    return frozenset(headers)


def real_header(api: RealApi) -> Path | None:
    """kernel_operator.h as g++ finds it in the real headers' search order; the PCH is made
    from that path, so what it records names the same files a check without it names."""
    for folder in api.include_dirs():
        candidate = folder / HEADER
        if candidate.is_file():
            return candidate
    return None


@functools.lru_cache(maxsize=8)
def compiler_identity(compiler: str) -> str | None:
    """The resolved compiler and its full version: a PCH only loads in the g++ that made it
    (g++ would ignore another's, but it would then never be rebuilt)."""
    resolved = os.path.realpath(compiler)
    try:
        done = subprocess.run([resolved, "-dumpfullversion"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    version = done.stdout.strip()
    if done.returncode != 0 or not version:
        return None
    return f"{resolved}\0{version}"


def _key(api: RealApi, flags: Sequence[str], identity: str) -> str:
    digest = hashlib.sha256(_LAYOUT_VERSION.encode())
    for part in (api.root.name, identity, *flags):
        digest.update(part.encode() + b"\0")
    return f"{api.root.name}_{digest.hexdigest()[:16]}"


def _ready(final: Path) -> bool:
    """Published, and the .gch what was built: g++ does not always fall back on a damaged
    one (truncated, it stops; damaged inside, cc1plus may crash or, worse, report errors
    in the real headers), so one that differs from its build is never handed out."""
    gch = final / _INCLUDE / _GCH
    try:
        recorded = json.loads((final / _READY).read_text(encoding="utf-8"))
        info = gch.stat()
        if info.st_size != recorded["size"]:
            return False
        seen = (str(gch), info.st_ino, info.st_size, info.st_mtime_ns)
        if seen in _VERIFIED:
            return True
        if _digest(gch) != recorded["sha256"]:
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    _VERIFIED.add(seen)
    return True


# The .gch files this process has read in full and found as built (~0.25 s for 200 MB,
# once per process): a file rewritten since has another mtime or inode and is read again.
_VERIFIED: set[tuple[str, int, int, int]] = set()


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _build_and_publish(final: Path, argv: list[str], header: Path, timeout_s: float) -> None:
    building = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        if _build(building, argv, header, timeout_s):
            publish_folder(building, final, _ready)
            prune_unused(final.parent, final)
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _build(building: Path, argv: list[str], header: Path, timeout_s: float) -> bool:
    include = building / _INCLUDE
    include.mkdir()
    target = include / _GCH
    command = [*argv, "-w", "-H", "-x", "c++-header", str(header), "-o", str(target)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout_s, check=False,
                              cwd=building)
    except (OSError, subprocess.SubprocessError):
        return False  # a timeout included: the check goes on without a PCH
    if done.returncode != 0 or not target.is_file():
        return False
    # -H: one line a header read, "." per depth, then its name (stderr; nothing else there
    # for a clean build but the headers' "Multiple include guards" advice).
    text = done.stderr.decode("utf-8", errors="replace")
    headers = sorted({line.lstrip(".")[1:] for line in text.splitlines()
                      if line.startswith(".") and line.lstrip(".").startswith(" ")})
    record = {"size": target.stat().st_size, "sha256": _digest(target), "headers": headers}
    (building / _READY).write_text(json.dumps(record) + "\n", encoding="utf-8")
    return True
