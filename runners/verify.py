"""The verification harness, parent side: shared by every backend.

The candidate is checked statically here (no torch import: the parent stays light), then
the reference and the candidate run in a worker process with a timeout. A hang, a segfault
or a worker that dies leaves no verdict file: that is a failed attempt with the log's tail,
never a crash of the bot.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sys
import tempfile
from pathlib import Path

import runners
from runners.anticheat import Finding, check_source
from runners.base import (
    Failure,
    SourceLocation,
    StageResult,
    VerifyRequest,
    VerifyResult,
)
from runners.sandbox import (
    ProcessOutcome,
    SandboxPolicy,
    SandboxUnavailableError,
    run_isolated,
    sandbox_environment,
)

_MAX_SOURCE_BYTES = 2 * 1024 * 1024


def static_failures(candidate: Path) -> list[Failure]:
    """The static anti-cheat findings on a candidate's source, as failures."""
    try:
        source = candidate.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []  # the worker reports unreadable candidates with their reason
    if len(source) > _MAX_SOURCE_BYTES:
        return [Failure(check="load", message=f"the candidate is larger than "
                        f"{_MAX_SOURCE_BYTES // (1024 * 1024)} MB")]
    return [_finding_failure(finding, candidate) for finding in check_source(
        source, filename=str(candidate))]


def _finding_failure(finding: Finding, candidate: Path) -> Failure:
    return Failure(check=finding.check, message=finding.message,
                   location=SourceLocation(file=str(candidate), line=finding.line,
                                           source_line=finding.source_line))


def _read_verdict(path: Path, key: str) -> VerifyResult | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        payload = str(document["result"])
        expected = hmac.new(key.encode(), payload.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, str(document["mac"])):
            return None
        return VerifyResult.from_json(json.loads(payload))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _no_verdict(outcome: ProcessOutcome, timeout_s: float) -> VerifyResult:
    if outcome.killed_because:
        failure = Failure(check="crash", message=f"the worker was stopped: it started "
                          f"{outcome.killed_because}", log_tail=outcome.log_tail or None)
    elif outcome.timed_out:
        failure = Failure(check="timeout", message=f"no verdict within {timeout_s:g} s: the "
                          "candidate (or the reference) hangs or is far too slow; the worker "
                          "was killed", log_tail=outcome.log_tail or None)
    elif outcome.signal_name:
        failure = Failure(check="crash", message=f"the worker died of {outcome.signal_name} "
                          "(a kernel that reads or writes out of bounds, an abort...)",
                          log_tail=outcome.log_tail or None)
    else:
        failure = Failure(check="crash", message=f"the worker exited with status "
                          f"{outcome.returncode} and no verdict (the candidate exited the "
                          "process, or forged its verdict)", log_tail=outcome.log_tail or None)
    return VerifyResult.failed(failure, stages=[StageResult("check", False, outcome.seconds)])


def _package_root() -> str:
    return str(Path(runners.__file__).resolve().parent.parent)


def run_harness(request: VerifyRequest, *, python: str | None = None,
                policy: SandboxPolicy | None = None) -> VerifyResult:
    """Verify `request.candidate` against `request.reference` in a sandboxed worker."""
    findings = static_failures(request.candidate)
    key = secrets.token_hex(32)
    with tempfile.TemporaryDirectory(prefix="opbot-verify-") as tmp:
        workdir = Path(tmp)
        result_path = workdir / f"verdict-{secrets.token_hex(8)}.json"
        envelope = {"job": request.to_json(), "result": str(result_path), "key": key}
        env = sandbox_environment(workdir, {"PYTHONPATH": _package_root()})
        try:
            outcome = run_isolated([python or sys.executable, "-m", "runners.harness"],
                                   cwd=workdir, timeout_s=request.timeout_s,
                                   log_path=workdir / "worker.log", env=env,
                                   stdin_data=json.dumps(envelope), policy=policy,
                                   readable=[request.reference, request.candidate,
                                             Path(_package_root())])
        except SandboxUnavailableError as exc:
            return VerifyResult.failed(Failure(check="sandbox", message=str(exc)))
        result = _read_verdict(result_path, key) or _no_verdict(outcome, request.timeout_s)
        if not outcome.sandboxed:
            result.warnings.append("unsandboxed: bubblewrap is missing and the policy allowed "
                                   "running the candidate without a sandbox")
    if not findings:
        return result
    return VerifyResult(status="failed", reasons=findings + result.reasons, cases=result.cases,
                        stages=result.stages, device=result.device, warnings=result.warnings,
                        timing=result.timing, inferred=result.inferred)
