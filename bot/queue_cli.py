"""`opbot queue`: list, retry and drop the jobs of `opbot serve`'s durable queue.

Safe while the server runs: each change is one SQLite transaction under the same locking
the server's queue uses (BEGIN IMMEDIATE, WAL), and a state check inside it, so a job the
worker claimed a moment ago is never dropped as if it were waiting. `list` only reads (the
file is opened read-only); nothing here creates a queue, or writes into a file that is none.
Exit codes: 0 done; 1 no such job, or a job in the wrong state; 2 no queue there (no file,
not an opbot queue, a corrupt one) or a usage error (a job id is a whole number from 1).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from bot.queue import (
    DEFAULT_STATE_DIR,
    STATES,
    JobQueue,
    JobRow,
    JobStateError,
    NotAQueueError,
    check_queue_file,
    queue_path,
)

__all__ = ["DEFAULT_STATE_DIR", "queue"]

EXIT_OK, EXIT_REFUSED, EXIT_NO_QUEUE = 0, 1, 2
# SQLite's rowid range: a larger number names no job (and would overflow sqlite3's int).
JOB_ID = click.IntRange(1, 2**63 - 1)

_state_dir = click.option("--state-dir", type=click.Path(path_type=Path),
                          default=DEFAULT_STATE_DIR, show_default=True,
                          help="The folder `opbot serve --state-dir` names.")
# `retry -1` would read as an unknown option "-1": take it as the ID, which the range refuses
# ("-1 is not in the range"); other unknown options still fail as usage errors.
_ID_ARGUMENT = {"ignore_unknown_options": True}
_as_json = click.option("--json", "as_json", is_flag=True, help="JSON on stdout.")


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@contextmanager
def _opened(state_dir: Path, read_only: bool) -> Iterator[JobQueue]:
    """The queue in `state_dir`, checked read-only first (a change must not write a
    schema into an empty or foreign file); any SQLite error on it: exit 2, no traceback."""
    path = queue_path(state_dir)
    if not path.is_file():  # never create an empty queue where the server keeps none
        _fail(f"no queue at {path}: pass the --state-dir `opbot serve` uses", EXIT_NO_QUEUE)
    try:
        check_queue_file(path)
        found = JobQueue(path, read_only=read_only)
    except NotAQueueError as exc:
        _fail(f"{exc}: pass the --state-dir `opbot serve` uses", EXIT_NO_QUEUE)
    except sqlite3.Error as exc:
        _fail(f"cannot open the queue at {path}: {exc}", EXIT_NO_QUEUE)
    try:
        yield found
    except sqlite3.Error as exc:
        _fail(f"the queue at {path} could not be read or changed: {exc}", EXIT_NO_QUEUE)
    finally:
        found.close()


def last_error(row: JobRow) -> str | None:
    """Why the job last failed or waits: a dispatch's reason, an error, a failed summary."""
    result = row.result or {}
    for key in ("reason", "error"):
        if isinstance(result.get(key), str) and result[key]:
            return str(result[key])
    summary = result.get("summary")
    return str(summary) if row.status == "failed" and summary else None


def to_json(row: JobRow, now: float) -> dict[str, Any]:
    return {"id": row.id, "key": row.key, "action": row.plan.get("action"),
            "repo": row.plan.get("repo"), "number": row.plan.get("number"),
            "state": row.status, "runs": row.runs, "age_seconds": round(now - row.created, 1),
            "due_in_seconds": round(max(row.not_before - now, 0.0), 1)
            if row.status == "queued" else None,
            "cancel_requested": row.cancel, "last_error": last_error(row)}


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _shown(text: object) -> str:
    """Text from a webhook, fit for a terminal: no escape sequences, no line breaks."""
    return "".join(char if char.isprintable() else "?" for char in str(text))


def _line(item: dict[str, Any]) -> str:
    where = _shown(f"{item['repo'] or '-'}#"
                   f"{item['number'] if item['number'] is not None else '-'}")
    error = _shown(item["last_error"] or "")[:80]
    return (f"{item['id']:>6}  {_shown(item['state']):<9}  {item['runs']:>4}  "
            f"{_age(item['age_seconds']):>5}  {_shown(item['action'] or '-'):<14}  "
            f"{where:<28}  {_shown(item['key'])}{'  ' + error if error else ''}")


@click.group()
def queue() -> None:
    """Inspect and steer `opbot serve`'s job queue (safe while the server runs)."""


@queue.command("list")
@click.option("--state", type=click.Choice(STATES), default=None,
              help="Only jobs in this state.")
@_as_json
@_state_dir
def list_jobs(state: str | None, as_json: bool, state_dir: Path) -> None:
    """The jobs, oldest first: id, state, runs, age, action, repo#number, key, last error."""
    now = time.time()
    with _opened(state_dir, read_only=True) as found:
        items = [to_json(row, now) for row in found.rows(state)]
    if as_json:
        click.echo(json.dumps({"jobs": items}, indent=2, ensure_ascii=True))
        return
    click.echo(f"{'id':>6}  {'state':<9}  {'runs':>4}  {'age':>5}  {'action':<14}  "
               f"{'repo#number':<28}  key / last error")
    for item in items:
        click.echo(_line(item))


def _apply(state_dir: Path, job_id: int, change: str, as_json: bool, said: str) -> None:
    with _opened(state_dir, read_only=False) as found:
        try:
            row = found.requeue(job_id) if change == "retry" else found.drop(job_id)
        except JobStateError as exc:
            _fail(str(exc), EXIT_REFUSED)
    item = to_json(row, time.time())
    if as_json:
        click.echo(json.dumps(item, indent=2, ensure_ascii=True))
    else:
        click.echo(f"job {job_id}: {said if row.status != 'running' else 'asked it to stop'}")


@queue.command(context_settings=_ID_ARGUMENT)
@click.argument("job_id", type=JOB_ID, metavar="ID")
@_as_json
@_state_dir
def retry(job_id: int, as_json: bool, state_dir: Path) -> None:
    """Queue a failed job (a dispatch given up) again, due now, its tries reset.
    ID is a job id from `opbot queue list` (a whole number from 1)."""
    _apply(state_dir, job_id, "retry", as_json, "queued again")


@queue.command(context_settings=_ID_ARGUMENT)
@click.argument("job_id", type=JOB_ID, metavar="ID")
@_as_json
@_state_dir
def drop(job_id: int, as_json: bool, state_dir: Path) -> None:
    """Cancel a queued or failed job; a running one is asked to stop (as /cancel does)."""
    _apply(state_dir, job_id, "drop", as_json, "dropped (cancelled)")
