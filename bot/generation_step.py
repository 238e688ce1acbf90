"""Generation as its own step: a child `opbot generate` holding no forge credential.

The job process talks to the forge; the generation step talks to the LLM and runs the
candidates (in their sandbox). Splitting them means nothing the agent writes, and nothing
the model says, can reach the token that comments, pushes and opens pull requests.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from bot.agent.outcome import GenerateOutcome
from bot.agent.transcript import Redactor
from bot.errors import BadInputError, OpbotError
from bot.policy import LLM_POLICY_VARIABLE, Policy, llm_policy_json
from bot.spec import OpSpec

# The generation step keeps the LLM's key and drops every other credential.
_LLM_KEYS = ("OPBOT_LLM_API_KEY", "OPENAI_API_KEY")
_CREDENTIAL_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY")
_EXTRA_SECONDS = 600  # beyond the policy's wall time: start-up, tracing, the package
_POLL_S = 1.0
# The child reports each step as a stderr line with this prefix; the job shows it on the PR.
PROGRESS_LINES_VARIABLE = "OPBOT_PROGRESS_LINES"
PROGRESS_PREFIX = "opbot-progress: "


def without_forge_credentials(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in environ.items()
            if name in _LLM_KEYS or not any(marker in name.upper()
                                            for marker in _CREDENTIAL_MARKERS)}


class GenerationCancelled(OpbotError):
    """/cancel stopped the generation step."""


def _never() -> bool:
    return False


def generate_without_credentials(spec: OpSpec, *, backend: str, out: Path, workdir: Path,
                                 policy: Policy, llm: bool, hint: str | None = None,
                                 draft: str | None = None,
                                 stopped: Callable[[], bool] = _never,
                                 progress: Callable[[str], None] | None = None,
                                 ) -> GenerateOutcome:
    argv = [sys.executable, "-m", "bot", "generate", str(spec.spec_path), "--backend",
            backend, "--out", str(out), "--json", "--llm", "openai" if llm else "offline",
            "--max-attempts", str(policy.attempts), "--first-drafts", str(policy.first_drafts),
            "--max-tokens", str(policy.token_budget()),
            "--time-budget", str(policy.wall_seconds)]
    if hint:
        (workdir / "hint.txt").write_text(hint, encoding="utf-8")
        argv += ["--hint-file", str(workdir / "hint.txt")]
    if draft:
        (workdir / "draft.py").write_text(draft, encoding="utf-8")
        argv += ["--starting-draft", str(workdir / "draft.py")]
    env = without_forge_credentials(os.environ)
    env["OPBOT_SANDBOX_POLICY"] = json.dumps(policy.sandbox.to_json())
    env[LLM_POLICY_VARIABLE] = llm_policy_json(policy)  # the child asks the model as we would
    env[PROGRESS_LINES_VARIABLE] = "1"
    watch = _Watch(stopped, progress or (lambda _line: None))
    stdout, stderr, code = _run(argv, env, policy.wall_seconds + _EXTRA_SECONDS, watch,
                                workdir)
    redactor = Redactor.from_environment()
    if code == 2:
        raise BadInputError(redactor.text(stderr.strip()[-2000:]).removeprefix("error: "))
    try:
        return GenerateOutcome.from_json(json.loads(stdout))
    except (ValueError, KeyError, TypeError):
        raise OpbotError("the generation step failed: "
                         f"{redactor.text(stderr.strip()[-2000:])}") from None


class _Watch:
    """What the job watches while the step runs: /cancel, and the step's progress lines."""

    def __init__(self, stopped: Callable[[], bool], progress: Callable[[str], None]) -> None:
        self.stopped = stopped
        self._progress = progress
        self._read = 0
        self._last = ""

    def report(self, err_path: Path) -> None:
        with err_path.open("rb") as handle:
            handle.seek(self._read)
            chunk = handle.read()
        complete = chunk[:chunk.rfind(b"\n") + 1]
        self._read += len(complete)
        lines = [line.removeprefix(PROGRESS_PREFIX) for line in
                 complete.decode("utf-8", "replace").splitlines()
                 if line.startswith(PROGRESS_PREFIX)]
        if lines and lines[-1] != self._last:
            self._last = lines[-1]
            self._progress(lines[-1])


def _run(argv: list[str], env: dict[str, str], timeout_s: float, watch: _Watch,
         workdir: Path) -> tuple[str, str, int]:
    """Run the step, checking once a second whether /cancel asked it to stop (and passing
    on its latest progress line); its whole process group goes when it is stopped or runs
    out of time."""
    out_path, err_path = workdir / "generate.out", workdir / "generate.err"
    with out_path.open("w") as out, err_path.open("w") as err:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=err, text=True,
                                   start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                code = process.wait(timeout=_POLL_S)
                break
            except subprocess.TimeoutExpired:
                watch.report(err_path)
            if watch.stopped() or time.monotonic() > deadline:
                _kill_group(process)
                if watch.stopped():
                    raise GenerationCancelled("/cancel stopped the generation")
                raise OpbotError(f"the generation step ran past {timeout_s - _EXTRA_SECONDS:g}"
                                 " s and was stopped")
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    plain = "\n".join(line for line in stderr.splitlines()
                      if not line.startswith(PROGRESS_PREFIX))
    return out_path.read_text(encoding="utf-8", errors="replace"), plain, code


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
