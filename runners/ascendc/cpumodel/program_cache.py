"""Built CPU programs kept by what went into them, so the same package is compiled once.

A generation verifies its package, a scan or a review verifies it again, a test suite
builds the example packages in several places: each a g++ run of tens of seconds over the
same inputs. The key covers everything the build reads that can differ: every file of the
package folder (names and bytes), the twin built in its place, the compiler flags and the
library (its cache key and archive). Only successful builds are kept (a failure's log names
the folder it came from and is the feedback a drafter reads). A package holding a link or
a special file, or too big to hash cheaply, is not cached: it is built as before.

The cache lies beside the CPU model library (OPBOT_CACHE_DIR); the sandboxed build and run
only read it. Entries beyond a few hundred are dropped oldest first.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

_MAX_HASHED_BYTES = 16 * 1024 * 1024
_MAX_FILES = 400
_KEPT = 256
_PROGRAM = "program"
_LOG = "log.txt"


def cache_key(folder: Path, twin: Path | None, flags: Sequence[str],
              archive: Path) -> str | None:
    """The build's key, or None when the package cannot be cached (links, size)."""
    digest = hashlib.sha256()
    for flag in flags:
        digest.update(b"flag\0" + flag.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(b"archive\0" + str(archive).encode("utf-8", "surrogateescape") + b"\0")
    try:
        info = archive.stat()
        digest.update(f"{info.st_size}:{info.st_mtime_ns}\0".encode())
        files = _package_files(folder)
        if files is None:
            return None
        for relative, path in files:
            digest.update(b"file\0" + relative.encode("utf-8", "surrogateescape") + b"\0")
            digest.update(path.read_bytes())
        if twin is not None:
            if twin.is_symlink() or not twin.is_file():
                return None
            digest.update(b"twin\0" + twin.read_bytes())
    except (OSError, RecursionError):  # (a folder nested too deep for os.walk)
        return None
    return digest.hexdigest()


def _package_files(folder: Path) -> list[tuple[str, Path]] | None:
    """Every regular file under `folder`, sorted; None if there is a link, a special file,
    or more than the cheap hashing allows."""
    found: list[tuple[str, Path]] = []
    total = 0
    for root, dirs, names in os.walk(folder, followlinks=False):
        for name in sorted(dirs):
            if (Path(root) / name).is_symlink():
                return None
        for name in sorted(names):
            path = Path(root) / name
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                return None
            total += info.st_size
            found.append((str(path.relative_to(folder)), path))
            if total > _MAX_HASHED_BYTES or len(found) > _MAX_FILES:
                return None
    return sorted(found)


def fetch(root: Path, key: str, program: Path, folder: Path) -> str | None:
    """Copy the cached program for `key` to `program`; its build log (the folder it was
    built from written as `folder`), or None when there is none."""
    entry = root / key
    try:
        log = (entry / _LOG).read_text(encoding="utf-8", errors="replace")
        shutil.copy2(entry / _PROGRAM, program)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # recently used: kept when older entries go
    return log.replace("{package}", str(folder))


def store(root: Path, key: str, program: Path, log: str, folder: Path) -> None:
    """Keep a successful build; a race with another process keeping the same is fine."""
    with contextlib.suppress(OSError):
        root.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
        try:
            shutil.copy2(program, building / _PROGRAM)
            (building / _LOG).write_text(log.replace(str(folder), "{package}"),
                                         encoding="utf-8")
            building.rename(root / key)
        finally:
            shutil.rmtree(building, ignore_errors=True)
        trim(root, _KEPT)


def trim(root: Path, kept: int) -> None:
    """Drop the least recently used entries of `root` beyond `kept`."""
    entries = [entry for entry in root.iterdir() if not entry.name.startswith(".")]
    if len(entries) <= kept:
        return
    entries.sort(key=lambda entry: entry.stat().st_mtime)
    for entry in entries[:len(entries) - kept]:
        shutil.rmtree(entry, ignore_errors=True)
