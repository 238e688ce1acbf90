"""The kernel's cap on a sandboxed child's processes: a fork bomb must not take the
machine's PIDs from the bot (CI once saw the bot's own forks fail with EAGAIN while a
bomb test ran beside them)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runners.pids_cgroup import PidsCgroup, _own_paths
from runners.sandbox import SandboxPolicy, child_environment, start_isolated


@pytest.mark.parametrize(("text", "v1", "v2"), [
    ("8:pids:/\n0::/\n", "/", "/"),
    ("12:cpu,cpuacct:/a\n5:pids:/docker/abc\n", "/docker/abc", None),
    ("0::/system.slice/opbot.service\n", None, "/system.slice/opbot.service"),
    ("garbage\n3:memory:/x\n", None, None),
])
def test_own_cgroup_paths_are_read_per_hierarchy(text: str, v1: str | None,
                                                 v2: str | None) -> None:
    assert _own_paths(text) == (v1, v2)


def test_a_hierarchy_that_is_not_a_cgroupfs_gives_none_and_leaves_nothing(
        tmp_path: Path) -> None:
    if os.geteuid() != 0:
        assert PidsCgroup.create(10, root=tmp_path) is None
        return
    (tmp_path / "pids").mkdir()
    assert PidsCgroup.create(10, root=tmp_path) is None  # no cgroup.procs appears
    assert list((tmp_path / "pids").iterdir()) == []


def _real_cgroup(limit: int) -> PidsCgroup:
    cgroup = PidsCgroup.create(limit)
    if cgroup is None:
        pytest.skip("no writable pids cgroup here (needs root and a pids hierarchy)")
    return cgroup


def test_the_cap_binds_root_and_close_kills_and_removes() -> None:
    cgroup = _real_cgroup(5)
    script = ("import os, time\nfails = 0\nfor _ in range(20):\n    try:\n"
              "        if os.fork() == 0:\n            time.sleep(60)\n            os._exit(0)\n"
              "    except OSError:\n        fails += 1\nprint(fails, flush=True)\n"
              "time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             preexec_fn=cgroup.join)  # noqa: PLW1509
    try:
        assert child.stdout is not None
        fails = int(child.stdout.readline())
        assert fails == 16  # 5 tasks: the script and 4 children
        assert len(cgroup.members()) == 5
        assert cgroup.limit_hits() == 16
    finally:
        cgroup.close()
    assert child.wait(timeout=10) < 0  # killed by close, not by the test
    assert not cgroup.path.exists()
    cgroup.close()  # idempotent


def test_a_fork_bomb_never_holds_more_than_its_cap(tmp_path: Path) -> None:
    _real_cgroup(1).close()  # skips where the kernel cannot cap it
    work = tmp_path / "work"
    work.mkdir()
    bomb = ("import os\nwhile True:\n    try:\n        os.fork()\n"
            "    except OSError:\n        pass\n")
    child = start_isolated([sys.executable, "-c", bomb], cwd=work, env=child_environment(),
                           log_path=tmp_path / "log", policy=SandboxPolicy(processes=40))
    assert child.cgroup is not None
    peak, reason = 0, None
    deadline = time.monotonic() + 30
    try:
        while reason is None and time.monotonic() < deadline:
            peak = max(peak, len(child.cgroup.members()))
            # The bot's own forks keep working while the bomb runs.
            assert subprocess.run(["true"], check=False).returncode == 0
            reason = child.check_tree()
            time.sleep(0.05)
    finally:
        outcome = child.finish()
    assert reason == "more than 40 processes (a fork bomb?)"
    assert peak <= 42  # the cap: the tree plus bwrap's two processes
    assert not child.cgroup.path.exists()
    assert not outcome.ok
