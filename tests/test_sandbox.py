"""The child-process runner: environment allowlist, timeouts, process groups, logs."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from runners.sandbox import child_environment, run_isolated
from runners.verify import _read_verdict


def test_secrets_never_reach_the_child() -> None:
    source = {"PATH": "/bin", "GITHUB_TOKEN": "t", "OPBOT_LLM_API_KEY": "k",
              "OPBOT_WEBHOOK_SECRET": "s", "TRITON_INTERPRET": "1", "AWS_ACCESS_KEY_ID": "a",
              "TORCH_SECRET_THING": "x", "HOME": "/root", "RANDOM_VAR": "r"}
    env = child_environment({"EXTRA": "1"}, source=source)
    assert env["PATH"] == "/bin"
    assert env["TRITON_INTERPRET"] == "1"
    assert env["EXTRA"] == "1"
    for name in ("GITHUB_TOKEN", "OPBOT_LLM_API_KEY", "OPBOT_WEBHOOK_SECRET",
                 "AWS_ACCESS_KEY_ID", "TORCH_SECRET_THING", "RANDOM_VAR"):
        assert name not in env


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild-alive"
    grandchild = tmp_path / "grandchild.py"
    grandchild.write_text(f"import pathlib, time\ntime.sleep(3)\npathlib.Path({str(marker)!r})"
                          ".touch()\n", encoding="utf-8")
    script = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(grandchild)!r}])\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n")
    started = time.monotonic()
    outcome = run_isolated([sys.executable, "-c", script], cwd=tmp_path, timeout_s=1.5,
                           log_path=tmp_path / "log", env=child_environment())
    assert outcome.timed_out
    assert time.monotonic() - started < 10
    assert "started" in outcome.log_tail
    time.sleep(4)
    assert not marker.exists()  # the grandchild died with its group


def test_signals_are_reported(tmp_path: Path) -> None:
    outcome = run_isolated([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), "
                            "signal.SIGSEGV)"], cwd=tmp_path, timeout_s=30,
                           log_path=tmp_path / "log", env=child_environment())
    assert outcome.signal_name == "SIGSEGV"
    assert not outcome.ok


def test_stdin_data_reaches_the_child_and_big_output_is_tailed(tmp_path: Path) -> None:
    script = ("import sys\ndata = sys.stdin.read()\n"
              "sys.stdout.write('x' * 5_000_000)\nprint()\nprint('got', data)\n")
    outcome = run_isolated([sys.executable, "-c", script], cwd=tmp_path, timeout_s=60,
                           log_path=tmp_path / "log", env=child_environment(),
                           stdin_data="hello")
    assert outcome.ok
    assert outcome.log_tail.rstrip().endswith("got hello")
    assert len(outcome.log_tail) <= 4000


def test_a_forged_verdict_is_not_read(tmp_path: Path) -> None:
    forged = tmp_path / "verdict.json"
    forged.write_text('{"result": "{\\"status\\": \\"passed\\"}", "mac": "00"}',
                      encoding="utf-8")
    assert _read_verdict(forged, "the-real-key") is None


def test_a_fork_bomb_is_stopped(tmp_path: Path) -> None:
    from runners.sandbox import SandboxPolicy, sandbox_environment

    bomb = tmp_path / "bomb.py"
    bomb.write_text("import os\nwhile True:\n    try:\n        os.fork()\n"
                    "    except OSError:\n        pass\n", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    outcome = run_isolated([sys.executable, str(bomb)], cwd=work, timeout_s=60,
                           log_path=work / "log", env=sandbox_environment(work),
                           policy=SandboxPolicy(processes=100), readable=[bomb])
    assert outcome.killed_because is not None
    assert "fork bomb" in outcome.killed_because
    assert time.monotonic() - started < 30


def test_without_bubblewrap_untrusted_code_does_not_run(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from runners import sandbox

    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    with pytest.raises(sandbox.SandboxUnavailableError, match="bubblewrap"):
        run_isolated([sys.executable, "-c", "print(1)"], cwd=tmp_path, timeout_s=30,
                     log_path=tmp_path / "log", env=child_environment(),
                     policy=sandbox.SandboxPolicy())
    allowed = run_isolated([sys.executable, "-c", "print('ran')"], cwd=tmp_path, timeout_s=30,
                           log_path=tmp_path / "log2", env=child_environment(),
                           policy=sandbox.SandboxPolicy(allow_unsandboxed=True))
    assert allowed.ok
    assert not allowed.sandboxed
    assert "WITHOUT a sandbox" in allowed.log_tail


def test_credential_files_are_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runners.sandbox import find_bwrap, sandbox_environment

    if find_bwrap() is None:
        pytest.skip("bubblewrap is not installed (scripts/setup installs it)")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY", encoding="utf-8")
    (home / ".netrc").write_text("machine github.com password hunter2", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    script = (f"import pathlib\nhome = pathlib.Path({str(home)!r})\n"
              "for path in (home / '.ssh' / 'id_ed25519', home / '.netrc'):\n"
              "    try:\n        print(path.read_text() or 'empty')\n"
              "    except OSError as exc:\n        print('denied', type(exc).__name__)\n")
    outcome = run_isolated([sys.executable, "-c", script], cwd=work, timeout_s=60,
                           log_path=work / "log", env=sandbox_environment(work),
                           readable=[home])
    assert outcome.ok, outcome.log_tail
    assert "PRIVATE KEY" not in outcome.log_tail
    assert "hunter2" not in outcome.log_tail
