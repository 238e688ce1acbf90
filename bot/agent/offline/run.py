"""Run the offline generator in a worker process (the reference is user code)."""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import runners
from bot.agent.offline.job import OfflineJob, OfflineResult
from runners.base import CaseSpec
from runners.sandbox import (
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
    """Run `job` through the named backend's offline generator in a sandboxed child."""
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
