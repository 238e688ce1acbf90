"""Worker entry point: `python -m bot.agent.offline`, the job arriving on stdin as JSON.

The envelope names the backend; the worker asks the backend registry for it and knows
no backend itself, so a new backend needs no edit here.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from bot.agent.offline.job import OfflineJob, OfflineResult


class OfflineGenerator(Protocol):
    """The part of a backend the worker uses."""

    def generate_offline(self, job: OfflineJob) -> OfflineResult:
        ...


def registry_backend(name: str) -> OfflineGenerator:
    from bot.agent.backends import get_backend  # the registry imports every backend

    return get_backend(name)


def answer(envelope: dict[str, Any],
           lookup: Callable[[str], OfflineGenerator] = registry_backend) -> dict[str, Any]:
    """The result's JSON for one envelope; a generator bug is reported, never a crash."""
    try:
        job = OfflineJob.from_json(envelope["job"])
        return lookup(str(envelope["backend"])).generate_offline(job).to_json()
    except Exception as exc:  # noqa: BLE001 - the caller reads the reason, not a traceback
        return {"status": "error", "reason": f"the offline generator failed: "
                f"{type(exc).__name__}: {exc}", "log": traceback.format_exc()[-4000:]}


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    # The parent reads the result file only once it is whole.
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(data), encoding="utf-8")
    partial.replace(path)


def warm_up() -> None:
    """What a warm generator server runs once before it forks generations
    (runners/warm.py): the backends imported, one throwaway trace."""
    import bot.agent.backends  # noqa: F401 - the registry imports every backend
    from bot.agent.offline.trace import warm_up as warm_up_tracing

    warm_up_tracing()


def main() -> int:
    envelope = json.loads(sys.stdin.read())
    _write_atomically(Path(envelope["result"]), answer(envelope))
    return 0


if __name__ == "__main__":
    sys.exit(main())
