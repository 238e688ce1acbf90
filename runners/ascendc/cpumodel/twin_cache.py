"""Compiled CPU twins kept by what they read, so a changed kernel does not recompile them.

A legacy package's program is two translation units: the twin (the driver main, rendered by
the verifier from the manifest) and the kernel. Verifying wrong kernels, repairs and tuning
variants of one operator changes the kernel and leaves the twin's inputs alone, yet each
build parsed tikicpulib.h again (~3 s of ~7). The twin's object is kept under a key of
everything in the folders its includes search first (every file's name, and its bytes but
for the kernel's), the twin, the flags and the compiler (path and version); with it, the
list of the other files g++ says the unit read (-MD: the library's, the real API's, the
system's) and their digests, all checked again before the object is used. A twin whose unit
read the kernel (included it, under any name) is not kept: what a unit reads follows from
the bytes of what it read and the names it could find, all in the key, so another kernel
in the same place is not read either.

The object is built in the sandbox (the package's headers are untrusted, as before) and only
read there later. Entries are never changed once published (a new one gets a name of its
own), so a check and the object it vouches for come from the same build. A folder with a
link, a special file, an unreadable folder or too much to digest cheaply is not cached, nor
a dependency list with a name this reader could misread.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from runners.ascendc.cpumodel.program_cache import trim

_OBJECT = "twin.o"
_DEPENDENCIES = "read.json"
_KEPT = 128
_MAX_FILES = 2000
_MAX_BYTES = 16 * 1024 * 1024
# Escapes g++ -MD writes and read_dependencies undoes; a backslash anywhere else (g++ leaves
# "a\\b.h" as it is, and a name ending in one is ambiguous), a tab or a control character:
# the list is not trusted.
_EXISTENCE_PROBES = re.compile(r"has_include|include_next|##")
_UNREADABLE = re.compile(r"\\(?![ #])|[\t\x00-\x08\x0b-\x1f\x7f]")


def twin_key(twin: Path, kernel: Path, folders: Sequence[Path], flags: Sequence[str],
             compiler: str) -> str | None:
    """The key for `twin` compiled with `flags` (`compiler`: "path\\0version"), its includes
    searching `folders` first, `kernel`'s bytes left out; None when a folder cannot be
    digested whole."""
    digest = hashlib.sha256()
    for part in (compiler, *flags):
        digest.update(b"part\0" + part.encode("utf-8", "surrogateescape") + b"\0")
    try:
        skipped = _identity(kernel)
        digest.update(b"twin\0" + twin.read_bytes())
        for index, folder in enumerate(folders):
            files = _files(folder)
            if files is None:
                return None
            digest.update(f"folder{index}\0".encode())
            for relative, path in files:
                digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
                if path is None:
                    digest.update(b"folder\0")
                elif _identity(path) == skipped:
                    digest.update(b"the kernel\0")
                else:
                    data = path.read_bytes()  # read once: probed and digested
                    if _probes(data):
                        return None
                    digest.update(hashlib.sha256(data).hexdigest().encode() + b"\0")
    except (OSError, RecursionError):  # (a folder nested too deep for os.walk)
        return None
    return digest.hexdigest()


def _probes(data: bytes) -> bool:
    """Whether a file could ask whether a file exists where no listing looks
    (__has_include, #include_next, or token pasting that could spell them)."""
    text = data.decode("utf-8", errors="replace")
    return _EXISTENCE_PROBES.search(text.replace("\\\r\n", "").replace("\\\n", "")) is not None


def _identity(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_dev, info.st_ino


def _files(folder: Path) -> list[tuple[str, Path | None]] | None:
    """Every entry under `folder`, sorted: (relative path, the file; None for a folder);
    None for a link, a special file, a folder that cannot be listed, or too much."""
    found: list[tuple[str, Path | None]] = []
    total = 0

    def refuse(error: OSError) -> None:
        raise error

    for root, dirs, names in os.walk(folder, followlinks=False, onerror=refuse):
        for name in (*dirs, *names):
            path = Path(root) / name
            info = path.lstat()
            relative = str(path.relative_to(folder))
            if stat.S_ISDIR(info.st_mode):
                found.append((relative + "/", None))
            elif stat.S_ISREG(info.st_mode):
                total += info.st_size
                found.append((relative, path))
            else:
                return None
            if len(found) > _MAX_FILES or total > _MAX_BYTES:
                return None
    return sorted(found, key=lambda item: item[0])


def fetch(root: Path, key: str, target: Path) -> bool:
    """Copy a kept object for `key` to `target` (a new file) if every other file its unit
    read is unchanged."""
    try:
        entries = sorted(root.glob(f"{key}-*"))
    except OSError:
        return False
    for entry in entries:
        try:
            recorded = json.loads((entry / _DEPENDENCIES).read_text(encoding="utf-8"))
            if not all(_digest(Path(str(item["path"]))) == item["sha256"] for item in recorded):
                continue
            shutil.copyfile(entry / _OBJECT, target)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        with contextlib.suppress(OSError):
            os.utime(entry)  # recently used: kept when older entries go
        return True
    return False


def store(root: Path, key: str, folders: Sequence[Path], built: Path, *,
          dependencies: Path, kernel: Path, trusted: Sequence[Path]) -> None:
    """Keep a compiled twin with the digests of the files outside `folders` that g++ says
    its unit read (those inside are in the key); nothing is kept when the list cannot be
    read safely, names a file that cannot be digested, names the kernel, or names a file
    outside `folders` and the `trusted` ones (the library's, the real API's, /usr: what
    a package cannot add files to, so where a header's own includes find the same)."""
    with contextlib.suppress(OSError, ValueError):
        text = dependencies.read_text(encoding="utf-8", errors="strict")
        paths = read_dependencies(text)
        if not paths or _UNREADABLE.search(text.replace("\\\n", " ")) or \
                not all(path.startswith("/") for path in paths):
            return
        skipped = _identity(kernel)
        if any(_identity(Path(path)) == skipped for path in paths):
            return
        inside = tuple(str(folder).rstrip("/") + "/" for folder in folders)
        allowed = tuple(str(folder).rstrip("/") + "/" for folder in trusted)
        # Lexically, as g++ wrote them ("<package>/../x.h" is not inside): the folders hold
        # no links (twin_key), the trusted ones are ours.
        normal = sorted({os.path.normpath(path) for path in paths})
        if not all(path.startswith((*inside, *allowed)) for path in normal):
            return
        recorded = [{"path": path, "sha256": _digest(Path(path))}
                    for path in normal if not path.startswith(inside)]
        content = json.dumps(recorded, sort_keys=True)
        name = f"{key}-{hashlib.sha256(content.encode()).hexdigest()[:16]}"
        if (root / name).exists():
            return
        root.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
        try:
            shutil.copyfile(built, building / _OBJECT)
            (building / _DEPENDENCIES).write_text(content, encoding="utf-8")
            building.rename(root / name)  # fails, harmlessly, if another process won
        finally:
            shutil.rmtree(building, ignore_errors=True)
        trim(root, _KEPT)


def read_dependencies(text: str) -> list[str]:
    """The prerequisites of a make rule as g++ -MD writes it ("target: a b \\ c"), with its
    escapes ("\\ " for a space, "\\#" for "#", "$$" for "$") undone; the target left out."""
    joined = text.replace("\\\n", " ")
    _, separator, rest = joined.partition(": ")
    if not separator:
        return []
    paths: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(rest):
        char = rest[index]
        if char == "\\" and rest[index + 1:index + 2] in (" ", "#"):
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


def _digest(path: Path) -> str:
    """sha256 of what reading `path` gives, which must be a regular file."""
    with path.open("rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return hashlib.file_digest(handle, "sha256").hexdigest()

