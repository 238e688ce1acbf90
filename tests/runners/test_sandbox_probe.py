"""Where bubblewrap cannot create its namespaces (a job container under Docker's default
seccomp profile, a systemd unit with RestrictNamespaces), untrusted code must not start
"sandboxed" only to fail with "Creating new namespace failed" in every candidate: opbot
probes once, refuses with the reason and what to change, and `opbot doctor` reports it.

The hostile host is real: the probe runs inside a bwrap of its own started with
--disable-userns, where the kernel refuses every further user namespace, as Docker's
default profile does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runners.sandbox import find_bwrap, sandbox_status
from tests.support import REPO

BWRAP = find_bwrap()
pytestmark = pytest.mark.skipif(BWRAP is None,
                                reason="bubblewrap is not installed (scripts/setup installs it)")

# In the probe's own words, from inside a host that forbids user namespaces.
_INSIDE = r"""
import json, sys
from pathlib import Path
from bot.doctor import _sandbox
from runners.sandbox import SandboxPolicy, SandboxUnavailableError, child_environment, run_isolated

work = Path(sys.argv[1])
found = {"doctor": _sandbox()}
try:
    run_isolated([sys.executable, "-c", "print('ran')"], cwd=work, timeout_s=30,
                 log_path=work / "strict.log", env=child_environment(), policy=SandboxPolicy())
    found["strict"] = "ran"
except SandboxUnavailableError as exc:
    found["strict"] = str(exc)
outcome = run_isolated([sys.executable, "-c", "print('ran')"], cwd=work, timeout_s=30,
                       log_path=work / "open.log", env=child_environment(),
                       policy=SandboxPolicy(allow_unsandboxed=True))
found["opted_out"] = {"ok": outcome.ok, "sandboxed": outcome.sandboxed, "log": outcome.log_tail}
print(json.dumps(found))
"""


def _without_user_namespaces(tmp_path: Path, *extra: str,
                             confinement: tuple[str, ...] = ("--disable-userns",)
                             ) -> dict[str, object]:
    script = tmp_path / "inside.py"
    script.write_text(_INSIDE, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    assert BWRAP is not None
    argv = [BWRAP, "--unshare-user", *confinement, "--die-with-parent",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--bind", str(tmp_path), str(tmp_path), "--ro-bind", str(REPO), str(REPO),
            "--chdir", str(REPO), *extra, sys.executable, str(script), str(work)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 and "disable-userns" in done.stderr:
        pytest.skip(f"this bwrap cannot forbid nested user namespaces: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(found, dict)
    return found


def test_the_sandbox_starts_on_this_machine() -> None:
    status = sandbox_status()
    assert status.works, status.reason
    assert status.reason is None
    assert status.profile is None
    assert sandbox_status() is status  # probed once per process


def test_a_host_without_user_namespaces_refuses_untrusted_code_with_the_reason(
        tmp_path: Path) -> None:
    found = _without_user_namespaces(tmp_path)
    doctor = found["doctor"]
    assert isinstance(doctor, dict)
    assert doctor["works"] is False
    assert "Creating new namespace failed" in str(doctor["reason"])
    assert doctor["allow_unsandboxed"] is False
    # What to change, not only what broke.
    assert any(hint in str(doctor["profile"]) for hint in (
        "seccomp-bwrap.json", "unprivileged_userns_clone", "max_user_namespaces",
        "apparmor", "RestrictNamespaces"))
    strict = str(found["strict"])
    assert strict != "ran"
    assert "Creating new namespace failed" in strict
    assert "OPBOT_ALLOW_UNSANDBOXED=1" in strict
    # Not the message of a missing bwrap: bwrap is there, it cannot start.
    assert "is not installed" not in strict


def test_a_container_with_masked_proc_paths_is_told_to_unmask_them(tmp_path: Path) -> None:
    """Docker masks /proc/keys, /proc/timer_list, ... with bind mounts; the kernel then refuses
    a fresh /proc in a user namespace ("mount too revealing") even where seccomp allows every
    namespace. The same masking, done here by an outer bwrap, must get the right remedy."""
    if not Path("/proc/timer_list").exists():
        pytest.skip("this kernel has no /proc/timer_list to mask as Docker does")
    found = _without_user_namespaces(
        tmp_path, "--ro-bind", "/dev/null", "/proc/timer_list",
        confinement=("--unshare-pid",))
    doctor = found["doctor"]
    assert isinstance(doctor, dict)
    assert doctor["works"] is False
    assert "Can't mount proc" in str(doctor["reason"])
    assert "systempaths=unconfined" in str(doctor["profile"])
    assert "systempaths=unconfined" in str(found["strict"])


def test_the_policys_opt_out_still_runs_and_says_so(tmp_path: Path) -> None:
    found = _without_user_namespaces(tmp_path)
    opted_out = found["opted_out"]
    assert isinstance(opted_out, dict)
    assert opted_out["ok"] is True
    assert opted_out["sandboxed"] is False
    assert "WITHOUT a sandbox" in str(opted_out["log"])
    assert "ran" in str(opted_out["log"])


def test_the_refusal_reaches_the_user_as_an_error_not_a_traceback(tmp_path: Path) -> None:
    """`opbot verify` and `opbot doctor` on such a host: a clear answer, no traceback."""
    script = tmp_path / "user.sh"
    ref = REPO / "tests/data/refs/kb_03_leaky_relu.py"
    impl = REPO / "tests/data/candidates/leaky_relu__good_param.py"
    script.write_text(
        "#!/bin/sh\n"
        f"{sys.executable} -m bot verify --json {ref} {impl} > {tmp_path}/verify.json "
        f"2> {tmp_path}/verify.err\necho $? > {tmp_path}/verify.rc\n"
        f"exec {sys.executable} -m bot doctor --json\n", encoding="utf-8")
    script.chmod(0o755)
    assert BWRAP is not None
    argv = [BWRAP, "--unshare-user", "--disable-userns", "--die-with-parent",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--bind", str(tmp_path), str(tmp_path), "--ro-bind", str(REPO), str(REPO),
            "--chdir", str(REPO), str(script)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    assert report["sandbox"]["works"] is False
    assert "Creating new namespace failed" in report["sandbox"]["reason"]
    verify_rc = int((tmp_path / "verify.rc").read_text())
    verify_err = (tmp_path / "verify.err").read_text()
    verify_out = (tmp_path / "verify.json").read_text()
    assert verify_rc != 0
    assert "Traceback" not in verify_err
    verdict = json.loads(verify_out)
    assert verdict["status"] == "failed"
    assert [reason["check"] for reason in verdict["reasons"]] == ["sandbox"]
    assert "Creating new namespace failed" in verdict["reasons"][0]["message"]


def test_code_in_the_sandbox_cannot_make_a_user_namespace_of_its_own(tmp_path: Path) -> None:
    """In a user namespace of its own a candidate would hold every capability there (mount,
    netlink, nf_tables): the kernel surface behind many local-root bugs."""
    from runners.sandbox import (
        SandboxPolicy,
        _can_disable_userns,
        run_isolated,
        sandbox_environment,
    )

    assert BWRAP is not None
    if not _can_disable_userns(BWRAP):
        pytest.skip(f"{BWRAP} is older than bubblewrap 0.8 (no --disable-userns)")
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "CLONE_NEWUSER = 0x10000000\n"
        "if libc.unshare(CLONE_NEWUSER) == 0:\n"
        "    print('NESTED USERNS MADE')\n"
        "else:\n"
        "    print('refused', os.strerror(ctypes.get_errno()))\n", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    outcome = run_isolated([sys.executable, str(probe)], cwd=work, timeout_s=60,
                           log_path=tmp_path / "log", env=sandbox_environment(work),
                           policy=SandboxPolicy(), readable=[probe])
    assert outcome.sandboxed
    assert outcome.ok, outcome.log_tail
    assert "NESTED USERNS MADE" not in outcome.log_tail
    assert "refused" in outcome.log_tail


def test_a_bwrap_that_cannot_stop_nested_user_namespaces_is_reported(tmp_path: Path) -> None:
    """Ubuntu 22.04's bwrap 0.6 has no --disable-userns: the sandbox starts, but it is
    weaker, and doctor (and so the runner's pre-flight) must say so, not stay silent."""
    from bot.doctor import render_table

    assert BWRAP is not None
    old = tmp_path / "bwrap"
    old.write_text(f'#!/bin/sh\nif [ "$1" = --help ]; then echo "usage: bwrap [OPTIONS]"; '
                   f'exit 0; fi\nexec {BWRAP} "$@"\n', encoding="utf-8")
    old.chmod(0o755)
    status = sandbox_status(str(old))
    assert status.works, status.reason
    assert status.userns_blocked is False
    assert sandbox_status(BWRAP).userns_blocked is True
    report = {"sandbox": {**status.to_json(), "allow_unsandboxed": False}}
    assert "weak" in render_table(report)
    assert "bubblewrap >= 0.8" in render_table(report)
