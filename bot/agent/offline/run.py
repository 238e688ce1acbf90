"""Run the offline generator in a worker process (the reference is user code)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import runners
from bot.agent.offline import cache
from bot.agent.offline.job import OfflineJob, OfflineResult
from runners import warm, warm_pool
from runners.base import CaseSpec
from runners.sandbox import (
    ProcessOutcome,
    SandboxUnavailableError,
    private_workdir,
    read_untrusted,
    run_isolated,
    sandbox_environment,
)

GENERATOR_TIMEOUT_S = 600.0
_MAX_RESULT_BYTES = 64 * 1024 * 1024


def generate_in_worker(reference: Path, *, op_name: str, init_args: list[Any] | None,
                       cases: list[CaseSpec], timeout_s: float = GENERATOR_TIMEOUT_S,
                       backend: str = "triton", generation: str = "legacy",
                       options: Mapping[str, str] | None = None) -> OfflineResult:
    """Trace the reference and write the backend's candidate, in a child process with a
    timeout. `generation` is the Ascend C toolchain option; `options` adds other knobs."""
    job = OfflineJob(reference=reference.resolve(), op_name=op_name, init_args=init_args,
                     cases=list(cases), options={"generation": generation, **(options or {})})
    return run_in_worker(backend, job, timeout_s=timeout_s)


def run_in_worker(backend: str, job: OfflineJob, *,
                  timeout_s: float = GENERATOR_TIMEOUT_S) -> OfflineResult:
    """Run `job` through the named backend's offline generator in a sandboxed child, or
    answer it from the cache of earlier answers (bot/agent/offline/cache.py). With the cache
    the child traces a private copy of the reference, the bytes the key was made of: a file
    changed meanwhile cannot leave its draft under the old bytes' key."""
    if not cache.switched_on():
        return _generate(backend, job, timeout_s)
    with private_workdir("opbot-reference-") as staged:
        copy = cache.stage(job.reference, staged)
        key = None if copy is None else cache.job_key(backend, replace(job, reference=copy))
        if copy is None or key is None:
            return _generate(backend, job, timeout_s)
        kept = cache.fetch(key)
        if kept is not None:
            return kept
        result = _generate(backend, replace(job, reference=copy), timeout_s)
    # What the user reads names their file, not the private copy.
    result = replace(result, reason=result.reason.replace(str(copy), str(job.reference)))
    cache.store(key, result)
    return result


def _generate(backend: str, job: OfflineJob, timeout_s: float) -> OfflineResult:
    """The generator's answer from a sandboxed child: forked from this process's warm
    generator server where warm workers are on (runners/warm.py), else started cold."""
    if warm_pool.wanted(None):
        answered = _run_warm(backend, job, timeout_s)
        if answered is not None:
            return answered
    with private_workdir("opbot-generate-") as tmp:
        # The child writes only in work/; its log lies beside it, out of its reach.
        workdir = tmp / "work"
        workdir.mkdir()
        result_path = workdir / f"generated-{secrets.token_hex(8)}.json"
        envelope = {"result": str(result_path), "backend": backend, "job": job.to_json()}
        root = str(Path(runners.__file__).resolve().parent.parent)
        try:
            outcome = run_isolated([sys.executable, "-m", "bot.agent.offline"], cwd=workdir,
                                   timeout_s=timeout_s, log_path=tmp / "generator.log",
                                   env=sandbox_environment(workdir, {"PYTHONPATH": root}),
                                   stdin_data=json.dumps(envelope),
                                   readable=[job.reference, Path(root)])
        except SandboxUnavailableError as exc:
            return OfflineResult(status="error", reason=str(exc))
        data = read_untrusted(result_path, _MAX_RESULT_BYTES)  # never a symlink or a FIFO
    return _result(data, outcome, timeout_s)


def _result(data: bytes | None, outcome: ProcessOutcome, timeout_s: float) -> OfflineResult:
    """The generator's answer from its result file, or why there is none."""
    try:
        if data is not None:
            return OfflineResult.from_json(json.loads(data.decode("utf-8")))
    except (ValueError, TypeError, AttributeError):  # not the JSON object it should be
        pass
    if outcome.timed_out:
        reason = f"the offline generator ran past {timeout_s:g} s and was stopped"
    else:
        reason = (f"the offline generator died ({outcome.signal_name or outcome.returncode}): "
                  f"{outcome.log_tail[-800:]}")
    return OfflineResult(status="error", reason=reason)


def _run_warm(backend: str, job: OfflineJob, timeout_s: float) -> OfflineResult | None:
    """The generator as a warm server's child; None where none could start (run it cold)."""
    deadline = time.monotonic() + timeout_s
    workers = warm_pool.shared_workers(sys.executable, None)
    root = Path(runners.__file__).resolve().parent.parent
    with private_workdir("opbot-generate-") as tmp, \
            workers.lease({warm.GENERATOR: [job.reference, root]}) as lease:
        child = None if lease is None else lease.spawn(warm.GENERATOR, deadline=deadline,
                                                       log_path=tmp / "generator.log")
        if child is None or child.workdir is None or child.inside is None:
            return None
        name = f"generated-{secrets.token_hex(8)}.json"
        envelope = {"result": str(child.inside / name), "backend": backend,
                    "job": job.to_json()}
        timed_out = _feed_and_wait(child, json.dumps(envelope).encode("utf-8"),
                                   child.workdir / name, deadline)
        outcome = child.finish(timed_out=timed_out)
        data = read_untrusted(child.workdir / name, _MAX_RESULT_BYTES)
    return _result(data, outcome, timeout_s)


def _feed_and_wait(child: warm.WarmChild, envelope: bytes, result: Path,
                   deadline: float) -> bool:
    """Hand the child its job on stdin, then wait until its answer is there or it has
    exited (a process it left behind may hold its stdout open: finish() kills that one);
    True when the deadline came first. What it prints on stdout is read and dropped."""
    with contextlib.suppress(OSError):
        child.process.stdin.write(envelope)
    with contextlib.suppress(OSError):
        child.process.stdin.close()
    out: int | None = child.process.stdout.fileno()
    while (left := deadline - time.monotonic()) > 0:
        if child.check_tree() is not None or result.exists() or _exited(child.process.pid):
            return False
        ready, _, _ = select.select([out] if out is not None else [], [], [], min(left, 0.2))
        if ready and out is not None and not os.read(out, 1 << 16):
            out = None  # closed: keep polling the answer and the process only
            time.sleep(0.05)
    return True


def _exited(pid: int) -> bool:
    """Whether the process is gone or a zombie its server has not reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] in (["Z"], ["X"])
