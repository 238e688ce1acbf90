"""Generation as its own step: a child `opbot generate` holding no forge credential.

The job process talks to the forge; the generation step talks to the LLM and runs the
candidates (in their sandbox). Splitting them means nothing the agent writes, and nothing
the model says, can reach the token that comments, pushes and opens pull requests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from bot.agent.outcome import GenerateOutcome
from bot.agent.transcript import Redactor
from bot.errors import BadInputError, OpbotError
from bot.policy import Policy
from bot.spec import OpSpec

# The generation step keeps the LLM's key and drops every other credential.
_LLM_KEYS = ("OPBOT_LLM_API_KEY", "OPENAI_API_KEY")
_CREDENTIAL_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY")
_EXTRA_SECONDS = 600  # beyond the policy's wall time: start-up, tracing, the package


def without_forge_credentials(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in environ.items()
            if name in _LLM_KEYS or not any(marker in name.upper()
                                            for marker in _CREDENTIAL_MARKERS)}


def generate_without_credentials(spec: OpSpec, *, backend: str, out: Path, workdir: Path,
                                 policy: Policy, llm: bool, hint: str | None = None,
                                 draft: str | None = None) -> GenerateOutcome:
    argv = [sys.executable, "-m", "bot", "generate", str(spec.spec_path), "--backend",
            backend, "--out", str(out), "--json", "--llm", "openai" if llm else "offline",
            "--max-attempts", str(policy.attempts), "--max-tokens", str(policy.token_budget()),
            "--time-budget", str(policy.wall_seconds)]
    if hint:
        (workdir / "hint.txt").write_text(hint, encoding="utf-8")
        argv += ["--hint-file", str(workdir / "hint.txt")]
    if draft:
        (workdir / "draft.py").write_text(draft, encoding="utf-8")
        argv += ["--starting-draft", str(workdir / "draft.py")]
    env = without_forge_credentials(os.environ)
    env["OPBOT_SANDBOX_POLICY"] = json.dumps(policy.sandbox.to_json())
    try:
        completed = subprocess.run(argv, env=env, capture_output=True, text=True, check=False,
                                   timeout=policy.wall_seconds + _EXTRA_SECONDS)
    except subprocess.TimeoutExpired:
        raise OpbotError(f"the generation step ran past {policy.wall_seconds:g} s and was "
                         "stopped") from None
    redactor = Redactor.from_environment()
    if completed.returncode == 2:
        raise BadInputError(redactor.text(completed.stderr.strip()[-2000:]).removeprefix(
            "error: "))
    try:
        return GenerateOutcome.from_json(json.loads(completed.stdout))
    except (ValueError, KeyError, TypeError):
        raise OpbotError("the generation step failed: "
                         f"{redactor.text(completed.stderr.strip()[-2000:])}") from None
