"""`opbot verify` on candidates that attack the machine: no connection leaves the sandbox,
no secret reaches opbot's output, no file appears outside the work folder, and opbot still
answers with its JSON verdict."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from runners.sandbox import find_bwrap
from tests.support import CANDIDATES, DATA, loopback_listener, run_opbot

HOSTILE = DATA / "hostile"
RELU = CANDIDATES / "refs" / "relu.py"
SECRETS = {"GITHUB_TOKEN": "ghp_attack_test_0a1b2c3d", "GITLAB_TOKEN": "glpat-attack-9z8y7x",
           "OPBOT_LLM_API_KEY": "sk-attack-5e6f7a8b", "OPBOT_WEBHOOK_SECRET": "whsec-attack-1357"}

pytestmark = pytest.mark.skipif(find_bwrap() is None,
                                reason="bubblewrap is not installed (scripts/setup installs it)")


def _verify(candidate: Path) -> tuple[int, str]:
    run = run_opbot("verify", str(RELU), str(candidate), "--backend", "triton", "--json",
                    "--timeout", "120", env=SECRETS)
    assert run.code in (0, 1), run.stderr
    assert run.json()["status"] in ("passed", "failed")
    return run.code, run.stdout + run.stderr


def test_no_connection_leaves_the_sandbox(tmp_path: Path) -> None:
    with loopback_listener() as (port, received):
        candidate = tmp_path / "network.py"
        candidate.write_text((HOSTILE / "network.py").read_text(encoding="utf-8").replace(
            "LISTENER_PORT = 0", f"LISTENER_PORT = {port}"), encoding="utf-8")
        _verify(candidate)
    assert received == []


def test_no_secret_reaches_the_output() -> None:
    _, output = _verify(HOSTILE / "secrets.py")
    for value in SECRETS.values():
        assert value not in output


def test_no_file_appears_outside_the_work_folder(tmp_path: Path) -> None:
    mark = f"opbot-escape-{uuid.uuid4().hex}"
    candidate = tmp_path / "tmpwrite.py"
    candidate.write_text((HOSTILE / "tmpwrite.py").read_text(encoding="utf-8").replace(
        '"opbot-escape-mark"', repr(mark)), encoding="utf-8")
    _verify(candidate)
    for folder in (Path("/tmp"), tmp_path, Path("/var/tmp")):
        assert not (folder / mark).exists(), folder
