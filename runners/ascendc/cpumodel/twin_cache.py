"""Compiled CPU twins kept by what they read, so a changed kernel does not recompile them.

A legacy package's program is two translation units: the twin (the driver main, rendered by
the verifier from the manifest) and the kernel. Verifying wrong kernels, repairs and tuning
variants of one operator changes the kernel and leaves the twin's inputs alone, yet each
build parsed tikicpulib.h again (~3 s of ~7). The twin's object is kept under a key of what
can decide which files its unit reads (the twin, the flags, the compiler, the names of the
files in the folders it searches), with the list of files it did read (g++ -MD) and their
digests; it is used again only when every one of those files still has its digest. Files
the library and the real API hold are read-only caches of their own, keyed by what built
them, and are digested all the same: the check is cheap next to a compile.

The object is built in the sandbox (the package's headers are untrusted, as before) and
only read there later; a link or a special file in a searched folder means no caching.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

_OBJECT = "twin.o"
_DEPENDENCIES = "read.json"
_KEPT = 128
_MAX_LISTED = 2000
# A placeholder for each searched folder in the kept list: the next build's folders differ.
_FOLDER_MARK = "{folder%d}/"


def twin_key(twin: Path, folders: Sequence[Path], flags: Sequence[str],
             compiler: str) -> str | None:
    """The key for `twin` compiled with `flags`, searching `folders`; None when a folder
    holds a link or a special file, or too many files to list cheaply."""
    digest = hashlib.sha256()
    for flag in flags:
        digest.update(b"flag\0" + flag.encode("utf-8", "surrogateescape") + b"\0")
    try:
        info = Path(compiler).stat()
        digest.update(f"compiler\0{compiler}\0{info.st_size}:{info.st_mtime_ns}\0".encode())
        digest.update(b"twin\0" + twin.read_bytes())
        for index, folder in enumerate(folders):
            names = _listing(folder)
            if names is None:
                return None
            digest.update(f"folder{index}\0".encode() + "\0".join(names).encode(
                "utf-8", "surrogateescape") + b"\0")
    except OSError:
        return None
    return digest.hexdigest()


def _listing(folder: Path) -> list[str] | None:
    """Every file's path under `folder` (what an #include could find there), sorted."""
    found: list[str] = []
    for root, dirs, names in os.walk(folder, followlinks=False):
        for name in (*dirs, *names):
            path = Path(root) / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode) or not (stat.S_ISDIR(info.st_mode)
                                                  or stat.S_ISREG(info.st_mode)):
                return None
            found.append(str(path.relative_to(folder)) + ("/" if name in dirs else ""))
            if len(found) > _MAX_LISTED:
                return None
    return sorted(found)


def fetch(root: Path, key: str, folders: Sequence[Path], target: Path) -> bool:
    """Copy the kept object for `key` to `target` if every file it read is unchanged."""
    entry = root / key
    try:
        recorded = json.loads((entry / _DEPENDENCIES).read_text(encoding="utf-8"))
        for item in recorded:
            path = _expand(str(item["path"]), folders)
            if path is None or _digest(path) != item["sha256"]:
                return False
        shutil.copy2(entry / _OBJECT, target)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    with contextlib.suppress(OSError):
        os.utime(entry)  # recently used: kept when older entries go
    return True


def store(root: Path, key: str, folders: Sequence[Path], built: Path,
          dependencies: Path) -> None:
    """Keep a compiled twin with the digests of the files g++ says its unit read; nothing
    is kept when the list cannot be read or names a file that cannot be digested."""
    with contextlib.suppress(OSError, ValueError):
        paths = read_dependencies(dependencies.read_text(encoding="utf-8", errors="strict"))
        if not paths or not all(path.startswith("/") for path in paths):
            return
        recorded = [{"path": _shrink(path, folders), "sha256": _digest(Path(path))}
                    for path in paths]
        root.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
        try:
            shutil.copy2(built, building / _OBJECT)
            (building / _DEPENDENCIES).write_text(json.dumps(recorded), encoding="utf-8")
            shutil.rmtree(root / key, ignore_errors=True)  # its files changed since
            building.rename(root / key)
        finally:
            shutil.rmtree(building, ignore_errors=True)
        _trim(root)


def read_dependencies(text: str) -> list[str]:
    """The prerequisites of a make rule as g++ -MD writes it ("target: a b \\ c"), with its
    escapes ("\\ " for a space, "$$" for "$") undone; the target left out."""
    joined = text.replace("\\\n", " ")
    _, separator, rest = joined.partition(": ")
    if not separator:
        return []
    paths: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(rest):
        char = rest[index]
        if char == "\\" and index + 1 < len(rest) and rest[index + 1] in " #\\":
            current.append(rest[index + 1])
            index += 2
            continue
        if char == "$" and rest[index + 1:index + 2] == "$":
            current.append("$")
            index += 2
            continue
        if char.isspace():
            if current:
                paths.append("".join(current))
                current = []
        else:
            current.append(char)
        index += 1
    if current:
        paths.append("".join(current))
    return paths


def _shrink(path: str, folders: Sequence[Path]) -> str:
    for index, folder in enumerate(folders):
        prefix = str(folder).rstrip("/") + "/"
        if path.startswith(prefix):
            return _FOLDER_MARK % index + path[len(prefix):]
    return path


def _expand(path: str, folders: Sequence[Path]) -> Path | None:
    for index, folder in enumerate(folders):
        mark = _FOLDER_MARK % index
        if path.startswith(mark):
            return folder / path[len(mark):]
    return Path(path) if path.startswith("/") else None


def _digest(path: Path) -> str:
    """sha256 of what reading `path` gives, which must be a regular file."""
    with path.open("rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _trim(root: Path) -> None:
    entries = [entry for entry in root.iterdir() if not entry.name.startswith(".")]
    if len(entries) <= _KEPT:
        return
    entries.sort(key=lambda entry: entry.stat().st_mtime)
    for entry in entries[:len(entries) - _KEPT]:
        shutil.rmtree(entry, ignore_errors=True)
