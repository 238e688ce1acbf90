"""Offline drafts kept by what went into them, so the same job is traced once.

The offline generator is deterministic: the same reference (its bytes), cases, init
arguments and options under the same generator code give the same draft. A generation
traces the reference for its starting draft, a `/regen` or a scan of the same package
traces it again, a test suite generates the example ops in many places: each a sandboxed
torch.export trace of seconds. The key covers the job, the backend, the generator code
(every file of bot/ and runners/) and the torch and Python versions. Only answers are kept
("generated", "unsupported"); an error (a timeout, a crash) is asked again next time.

The cache lies in opbot's cache folder (OPBOT_CACHE_DIR), out of the sandboxed
generator's reach; `OPBOT_OFFLINE_CACHE=0` switches it off. Entries beyond a few hundred
are dropped oldest first.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import sys
import tempfile
from pathlib import Path

import bot
import runners
from bot.agent.offline.job import OfflineJob, OfflineResult
from runners.ascendc.realapi.sources import cache_dir
from runners.sandbox import read_untrusted

_KEY_VERSION = b"opbot-offline-draft-1"
_KEPT_ANSWERS = ("generated", "unsupported")
_KEPT = 512
_MAX_REFERENCE_BYTES = 4 * 1024 * 1024
_MAX_ENTRY_BYTES = 16 * 1024 * 1024


def switched_on() -> bool:
    return os.environ.get("OPBOT_OFFLINE_CACHE", "1").strip() != "0"


def folder() -> Path:
    return cache_dir() / "offline-drafts"


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Every file of the code the generator runs (names and bytes), and the versions of
    what it traces with: a changed line anywhere means new keys."""
    digest = hashlib.sha256(_KEY_VERSION)
    for package in (bot, runners):
        root = Path(str(package.__file__)).resolve().parent
        for path in sorted(root.rglob("*")):
            if "__pycache__" in path.parts or path.is_symlink() or not path.is_file():
                continue
            digest.update(str(path.relative_to(root.parent)).encode("utf-8", "surrogateescape"))
            digest.update(b"\0" + path.read_bytes() + b"\0")
    for distribution in ("torch", "triton"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            digest.update(f"{distribution}={importlib.metadata.version(distribution)}\0"
                          .encode())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def stage(reference: Path, folder: Path) -> Path | None:
    """A private copy of the reference in `folder` (same name), read once: what the key is
    made of is what the generator traces. None where it cannot be read as a plain file."""
    raw = read_untrusted(reference, _MAX_REFERENCE_BYTES)
    if raw is None:
        return None
    copy = folder / reference.name
    try:
        copy.write_bytes(raw)
    except OSError:
        return None
    return copy


def job_key(backend: str, job: OfflineJob) -> str | None:
    """The job's key, or None when it cannot be cached (an unreadable or huge reference,
    arguments that are not plain JSON)."""
    try:
        reference = job.reference
        if reference.is_symlink() or not reference.is_file() \
                or reference.stat().st_size > _MAX_REFERENCE_BYTES:
            return None
        text = reference.read_bytes()
        described = json.dumps({**job.to_json(), "reference": reference.name,
                                "backend": backend}, sort_keys=True)
    except (OSError, TypeError, ValueError):
        return None
    digest = hashlib.sha256(code_fingerprint().encode() + b"\0")
    digest.update(described.encode("utf-8", "surrogateescape") + b"\0" + text)
    return digest.hexdigest()


def fetch(key: str) -> OfflineResult | None:
    """The kept answer for `key`, or None (none kept, or an entry that does not read)."""
    entry = folder() / f"{key}.json"
    raw = read_untrusted(entry, _MAX_ENTRY_BYTES)  # never a link, a FIFO, or unbounded
    if raw is None:
        return None
    try:
        result = OfflineResult.from_json(json.loads(raw.decode("utf-8")))
    except (ValueError, TypeError, AttributeError, RecursionError):
        return None
    if result.status not in _KEPT_ANSWERS:
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # recently used: kept when older entries go
    return result


def store(key: str, result: OfflineResult) -> None:
    """Keep an answer; a race with another process keeping the same is fine, and a cache
    that cannot be written only means the next run traces again."""
    if result.status not in _KEPT_ANSWERS:
        return
    root = folder()
    with contextlib.suppress(OSError):
        root.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=".partial-", dir=root)
        partial = Path(name)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(result.to_json(), out)
            partial.replace(root / f"{key}.json")
        finally:
            partial.unlink(missing_ok=True)
        _trim(root)


def _trim(root: Path) -> None:
    entries = list(root.glob("*.json"))
    if len(entries) <= _KEPT:
        return
    entries.sort(key=lambda entry: entry.stat().st_mtime)
    for entry in entries[:len(entries) - _KEPT]:
        with contextlib.suppress(OSError):
            entry.unlink()
