"""The generation transcript: every request, reply, candidate, verdict and feedback, as JSONL.

Secrets are redacted before anything is written: the LLM key and the value of every
environment variable whose name marks a credential. A transcript replays without the
model: `opbot replay` re-verifies each recorded candidate.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from bot.errors import BadInputError

REDACTED = "[REDACTED]"
_SECRET_MARKERS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
_MIN_SECRET_LENGTH = 4  # shorter values would redact ordinary words


class Redactor:
    """Replaces known secret values wherever they appear."""

    def __init__(self, secrets: Iterable[str]) -> None:
        unique = {secret for secret in secrets if secret and len(secret) >= _MIN_SECRET_LENGTH}
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted(unique, key=len, reverse=True)

    @classmethod
    def from_environment(cls, extra: Iterable[str | None] = (),
                         environ: Mapping[str, str] | None = None) -> Redactor:
        env = os.environ if environ is None else environ
        found = [value for name, value in env.items()
                 if any(marker in name.upper() for marker in _SECRET_MARKERS)]
        return cls([*found, *(item for item in extra if item)])

    def text(self, value: str) -> str:
        for secret in self._secrets:
            value = value.replace(secret, REDACTED)
        return value

    def scrub(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(key)): self.scrub(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(item) for item in value]
        return value


class Transcript:
    """Appends one JSON object a line; each line is flushed, so a killed run keeps its log."""

    def __init__(self, path: Path, redactor: Redactor) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._redactor = redactor
        self._handle: TextIO = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()  # parallel first drafts record from several threads

    def record(self, kind: str, **fields: Any) -> None:
        entry = self._redactor.scrub({"kind": kind, **fields})
        with self._lock:
            self._handle.write(json.dumps(entry, default=str) + "\n")
            self._handle.flush()

    def redacts(self, text: str) -> bool:
        """Whether `text` holds one of the secrets this transcript hides."""
        return self._redactor.text(text) != text

    def close(self) -> None:
        self._handle.close()


def read_transcript(path: Path) -> Iterator[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{path}: cannot read the transcript ({exc})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            raise BadInputError(f"{path}:{number}: not a JSON line") from None
        if not isinstance(entry, dict) or "kind" not in entry:
            raise BadInputError(f"{path}:{number}: not a transcript entry")
        yield entry


TRANSCRIPT_NAME = "transcript.jsonl"


def keep_beside(transcript: Transcript, out: Path | None,
                name: str | None = None) -> Path | None:
    """A copy of the transcript beside the package it produced, where `opbot replay` and a
    reviewer look for it (None when no package was written)."""
    if out is None:
        return None
    kept = out / (name or TRANSCRIPT_NAME)
    shutil.copyfile(transcript.path, kept)
    return kept
