"""The child-process runner: environment allowlist, limits, timeouts, process groups, logs,
and a parent that trusts nothing the child can touch (its log, its work folder)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from runners.sandbox import (
    ENV_ALLOWLIST,
    GIB,
    SandboxPolicy,
    child_environment,
    private_workdir,
    read_tail,
    read_tail_fd,
    remove_tree,
    run_isolated,
    start_isolated,
)
from tests.support import REPO

ROOT = REPO


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


# -- the environment: exact names only ----------------------------------------------------------

def test_secrets_by_another_name_never_reach_the_child() -> None:
    source = {"PATH": "/usr/bin:/bin", "ASCEND_HOME_PATH": "/usr/local/Ascend/cann",
              "LD_LIBRARY_PATH": "/usr/local/Ascend/cann/lib64",
              "TRITON_CREDS": "c", "TORCH_PASS": "p", "ASCEND_PAT": "glpat-xyz",
              "NPU_TOKEN": "n", "CANN_URL": "https://u:pw@h/", "GITHUB_TOKEN": "ghp_0123456789",
              "TORCH_HOME": "https://user:pw@host/", "LC_PASSWORD": "x", "TRITON_KEY": "k",
              "ASCEND_COOKIE": "c", "TORCH_SESSION": "s", "TRITON_CERT": "c",
              "TORCH_AUTHORIZATION": "a", "NPU_PRIVATE": "p", "OPBOT_LLM_API_KEY": "k"}
    env = child_environment(source=source)
    assert env["PATH"] == "/usr/bin:/bin"
    assert env["ASCEND_HOME_PATH"] == "/usr/local/Ascend/cann"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/Ascend/cann/lib64"
    for name in source.keys() - {"PATH", "ASCEND_HOME_PATH", "LD_LIBRARY_PATH"}:
        assert name not in env, name
    assert "glpat" not in repr(env)
    assert "pw@" not in repr(env)


def test_allowlisted_names_pass_but_not_with_a_secret_value() -> None:
    every = {name: f"/opt/{name.lower()}" for name in ENV_ALLOWLIST}
    assert child_environment(source=every).items() >= every.items()  # PATH is no "PAT"
    source = {"PATH": "/bin", "GITLAB_TOKEN": "glpat-abcdefgh12345",
              "LD_LIBRARY_PATH": "glpat-abcdefgh12345",        # a secret's value, renamed
              "ASCEND_OPP_PATH": "https://oauth2:tok@gitlab/x",  # a URL with credentials
              "TRITON_INTERPRET": "1", "OPBOT_TOKEN_ONE": "1"}  # short values are no secrets
    env = child_environment({"EXTRA_URL": "https://a:b@c/"}, source=source)
    assert "LD_LIBRARY_PATH" not in env
    assert "ASCEND_OPP_PATH" not in env
    assert env["TRITON_INTERPRET"] == "1"
    assert env["EXTRA_URL"] == "https://a:b@c/"  # opbot's own extras pass as given


# -- resource limits under a lower hard limit ----------------------------------------------------

def _python(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)


def test_apply_limits_clamps_to_the_hard_limits_in_force() -> None:
    script = (
        "import resource\n"
        "from runners.sandbox import GIB, SandboxPolicy, apply_limits\n"
        "for kind, hard in ((resource.RLIMIT_AS, 12_000_000_000), (resource.RLIMIT_CPU, 100),\n"
        "                   (resource.RLIMIT_FSIZE, 1 << 20)):\n"
        "    resource.setrlimit(kind, (hard, hard))\n"
        "apply_limits(SandboxPolicy(memory_bytes=16 * GIB, cpu_seconds=3600))\n"
        "get = resource.getrlimit\n"
        "print(get(resource.RLIMIT_AS), get(resource.RLIMIT_CPU), get(resource.RLIMIT_FSIZE),\n"
        "      get(resource.RLIMIT_CORE))\n"
        "apply_limits(SandboxPolicy(memory_bytes=1 * GIB, cpu_seconds=10))  # tighter: applied\n"
        "print(get(resource.RLIMIT_AS), get(resource.RLIMIT_CPU))\n")
    run = _python(script)
    assert run.returncode == 0, run.stderr
    first, second = run.stdout.splitlines()
    assert first == "(12000000000, 12000000000) (100, 100) (1048576, 1048576) (0, 0)"
    assert second == f"({GIB}, {GIB}) (10, 15)"


def test_a_child_starts_under_a_hard_address_space_limit_below_the_policy(
        tmp_path: Path) -> None:
    script = (
        "import resource, sys\nfrom pathlib import Path\n"
        "from runners.sandbox import GIB, SandboxPolicy, child_environment, run_isolated\n"
        "resource.setrlimit(resource.RLIMIT_AS, (12_000_000_000, 12_000_000_000))\n"
        f"work = Path({str(tmp_path)!r})\n"
        "outcome = run_isolated([sys.executable, '-c', 'print(\"child ran\")'], cwd=work,\n"
        "                       timeout_s=60, log_path=work / 'log', env=child_environment(),\n"
        "                       policy=SandboxPolicy(memory_bytes=16 * GIB))\n"
        "print(outcome.ok, outcome.log_tail.strip().splitlines()[-1])\n")
    run = _python(script)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True child ran"


# -- the parent reads the child's log through its own descriptor -----------------------------

def test_read_tail_fd_reads_the_end_without_moving_the_offset(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "log", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.write(fd, b"a" * 50_000 + "é end".encode())
        assert read_tail_fd(fd, 10) == "aaaaaé end"[-10:]
        assert os.lseek(fd, 0, os.SEEK_CUR) == 50_000 + len("é end".encode())
    finally:
        os.close(fd)
    assert read_tail_fd(fd) == ""  # a closed descriptor: nothing, no exception


def test_read_tail_by_path_follows_no_symlink_and_never_blocks(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("hunter2", encoding="utf-8")
    (tmp_path / "link").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo")
    started = time.monotonic()
    assert read_tail(tmp_path / "link") == ""
    assert read_tail(tmp_path / "fifo") == ""
    assert read_tail(tmp_path / "missing") == ""
    assert read_tail(secret) == "hunter2"
    assert time.monotonic() - started < 5


_SWAP_LOG = ("import os, sys\nlog = sys.argv[1]\nprint('before the swap', flush=True)\n"
             "os.unlink(log)\n"
             "if sys.argv[2] == 'fifo':\n    os.mkfifo(log)\n"
             "else:\n    os.symlink(sys.argv[2], log)\n"
             "print('after the swap', flush=True)\n")


@pytest.mark.parametrize("swap", ["symlink", "fifo"])
def test_a_child_cannot_swap_its_log_for_a_secret_or_a_fifo(tmp_path: Path, swap: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    log = work / "log"  # inside the child's folder: the worst case an old caller has
    target = "fifo" if swap == "fifo" else str(secret)
    started = time.monotonic()
    outcome = run_isolated([sys.executable, "-c", _SWAP_LOG, str(log), target], cwd=work,
                           timeout_s=60, log_path=log, env=child_environment())
    assert time.monotonic() - started < 30
    assert outcome.ok, outcome.log_tail
    assert "after the swap" in outcome.log_tail
    assert "TOP-SECRET" not in outcome.log_tail
    # The next run in the same folder replaces what the child left.
    again = run_isolated([sys.executable, "-c", "print('second')"], cwd=work, timeout_s=60,
                         log_path=log, env=child_environment())
    assert again.log_tail.strip() == "second"
    assert stat.S_ISREG(os.lstat(log).st_mode)
    assert secret.read_text(encoding="utf-8") == "TOP-SECRET-CONTENT"


# -- start_isolated: a child with pipes, watched by its parent ------------------------------------

def test_start_isolated_talks_through_pipes(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = ("import sys\nline = sys.stdin.readline()\nsys.stdout.write('echo ' + line)\n"
              "sys.stdout.flush()\nprint('to the log', file=sys.stderr)\n")
    child = start_isolated([sys.executable, "-c", script], cwd=work, env=child_environment(),
                           log_path=tmp_path / "child.log", pipes=True)
    assert child.process.stdin is not None
    assert child.process.stdout is not None
    child.process.stdin.write(b"hello\n")
    child.process.stdin.flush()
    assert child.process.stdout.readline() == b"echo hello\n"
    assert child.process.wait(timeout=60) == 0
    outcome = child.finish()
    assert outcome.ok
    assert outcome.log_tail.strip() == "to the log"
    assert child.finish() is outcome  # idempotent
    child.kill()  # and harmless afterwards
    assert stat.S_IMODE(os.stat(tmp_path / "child.log").st_mode) == 0o600


def test_start_isolated_without_pipes_logs_stdout_and_stderr(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    child = start_isolated([sys.executable, "-c", "import sys\nprint('out')\n"
                            "print('err', file=sys.stderr)\nprint(sys.stdin.read() or 'eof')"],
                           cwd=work, env=child_environment(), log_path=tmp_path / "log")
    assert child.process.stdin is None
    assert child.process.stdout is None
    child.process.wait(timeout=60)
    outcome = child.finish()
    assert outcome.ok
    assert set(outcome.log_tail.split()) == {"out", "err", "eof"}


def test_check_tree_stops_a_fork_bomb(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    bomb = ("import os, time\nfor _ in range(200):\n    try:\n        if os.fork() == 0:\n"
            "            time.sleep(60)\n            os._exit(0)\n    except OSError:\n"
            "        pass\ntime.sleep(60)\n")
    child = start_isolated([sys.executable, "-c", bomb], cwd=work, env=child_environment(),
                           log_path=tmp_path / "log", policy=SandboxPolicy(processes=30))
    deadline = time.monotonic() + 30
    reason = None
    while reason is None and time.monotonic() < deadline:
        reason = child.check_tree()
        time.sleep(0.2)
    outcome = child.finish()
    assert reason is not None
    assert "more than 30 processes" in reason
    assert outcome.killed_because == reason
    assert not outcome.ok


def test_start_isolated_refuses_without_bubblewrap(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from runners import sandbox

    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    with pytest.raises(sandbox.SandboxUnavailableError):
        start_isolated([sys.executable, "-c", "print(1)"], cwd=tmp_path,
                       env=child_environment(), log_path=tmp_path / "log",
                       policy=SandboxPolicy())
    child = start_isolated([sys.executable, "-c", "print('ran')"], cwd=tmp_path,
                           env=child_environment(), log_path=tmp_path / "log2",
                           policy=SandboxPolicy(allow_unsandboxed=True))
    child.process.wait(timeout=60)
    outcome = child.finish()
    assert not outcome.sandboxed
    assert outcome.log_tail.startswith("WARNING: running untrusted code WITHOUT a sandbox")
    assert outcome.log_tail.rstrip().endswith("ran")


# -- removing any tree a child leaves ---------------------------------------------------------

def _deep_tree(top: Path, depth: int) -> None:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            os.mkdir("d", dir_fd=fd)
            with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "wb") as f:
                f.write(str(level).encode())
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def test_remove_tree_survives_a_2000_deep_tree(tmp_path: Path) -> None:
    top = tmp_path / "deep"
    top.mkdir()
    _deep_tree(top, 2000)
    remove_tree(top)
    assert not top.exists()


def test_remove_tree_never_follows_symlinks_and_unlinks_special_files(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep", encoding="utf-8")
    top = tmp_path / "work"
    (top / "sub").mkdir(parents=True)
    (top / "to-file").symlink_to(outside / "keep.txt")
    (top / "sub" / "to-dir").symlink_to(outside, target_is_directory=True)
    (top / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(top / "sub" / "fifo")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(top / "sock"))
    remove_tree(top)
    assert not os.path.lexists(top)
    assert (outside / "keep.txt").read_text(encoding="utf-8") == "keep"
    remove_tree(top)  # gone already: no exception
    remove_tree(outside / "keep.txt")  # a file
    assert not outside.joinpath("keep.txt").exists()


def _locked_tree_is_removed(base: Path) -> bool:
    top = base / "work"
    (top / "locked" / "inner").mkdir(parents=True)
    (top / "locked" / "a.txt").write_text("a", encoding="utf-8")
    (top / "locked" / "inner" / "b.txt").write_text("b", encoding="utf-8")
    (top / "readonly").mkdir()
    (top / "readonly" / "c.txt").write_text("c", encoding="utf-8")
    os.chmod(top / "locked" / "inner", 0)
    os.chmod(top / "locked", 0)
    os.chmod(top / "readonly", 0o500)
    os.chmod(top, 0o500)
    remove_tree(top)
    return not os.path.lexists(top)


def test_remove_tree_removes_folders_without_permissions() -> None:
    base = Path(tempfile.mkdtemp(prefix="opbot-test-locked-"))
    try:
        if os.geteuid() != 0:
            assert _locked_tree_is_removed(base)
            return
        # Permissions do not bind root: make and remove the tree as an ordinary user.
        os.chown(base, 65534, 65534)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                code = 0 if _locked_tree_is_removed(base) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        remove_tree(base)
    assert not base.exists()


def test_private_workdir_is_removed_whatever_it_holds() -> None:
    with private_workdir("opbot-test-") as folder:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        _deep_tree(folder, 1500)
        os.mkfifo(folder / "fifo")
    assert not folder.exists()
    with pytest.raises(RuntimeError), private_workdir("opbot-test-") as other:
        raise RuntimeError("the caller failed")
    assert not other.exists()


def test_a_checkouts_git_folder_is_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """actions/checkout leaves an authorization header in .git/config: never readable."""
    from runners.sandbox import find_bwrap, run_isolated, sandbox_environment

    if find_bwrap() is None:
        pytest.skip("needs bubblewrap (the masks are bwrap binds)")
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "config").write_text("extraheader = AUTHORIZATION: basic c2VjcmV0\n")
    (checkout / "ops").mkdir()
    probe = checkout / "ops" / "probe.py"
    probe.write_text("import pathlib, sys\n"
                     "print(sorted(p.name for p in pathlib.Path(sys.argv[1]).iterdir()))\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(checkout / "ops")
    outcome = run_isolated([sys.executable, str(probe), str(checkout / ".git")], cwd=work,
                           timeout_s=60, log_path=tmp_path / "log",
                           env=sandbox_environment(work), readable=[checkout])
    assert outcome.returncode == 0, outcome.log_tail
    assert "[]" in outcome.log_tail
    assert "config" not in outcome.log_tail
