"""Docker-format seccomp profiles, loaded into a real kernel filter with libseccomp.

Docker itself is not needed to tell whether runners/provision/seccomp-bwrap.json lets
bubblewrap work: this module turns the profile into libseccomp rules the way Docker (runc)
does and runs a command under them. Run as a script it is the child that does it::

    python support_seccomp.py PROFILE.json exec CMD ARGS...   # filter, then exec CMD
    python support_seccomp.py PROFILE.json probe NAME...      # filter, then try each call

In order: drop root to nobody when running as root (a job container's user is not root,
and root's capabilities would hide what the filter denies), set no_new_privs (docker's
`no-new-privileges`; the kernel also requires it for an unprivileged filter), load the
filter, then exec or probe. `probe` prints {"name": errno} for each system call, called with
all-zero arguments: EPERM (1) means the filter refused it, anything else that it got to the
kernel.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
# libseccomp's actions (seccomp.h).
_ACT_KILL_THREAD = 0x00000000
_ACT_KILL_PROCESS = 0x80000000
_ACT_TRAP = 0x00030000
_ACT_ERRNO = 0x00050000
_ACT_LOG = 0x7FFC0000
_ACT_ALLOW = 0x7FFF0000
_OPS = {"SCMP_CMP_NE": 1, "SCMP_CMP_LT": 2, "SCMP_CMP_LE": 3, "SCMP_CMP_EQ": 4,
        "SCMP_CMP_GE": 5, "SCMP_CMP_GT": 6, "SCMP_CMP_MASKED_EQ": 7}
# AUDIT_ARCH_* values, which is what seccomp_arch_native() returns.
_ARCHES = {"SCMP_ARCH_X86_64": 0xC000003E, "SCMP_ARCH_AARCH64": 0xC00000B7}
_NR_SCMP_ERROR = -1
_PR_SET_NO_NEW_PRIVS = 38
NOBODY = 65534


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


def libseccomp_path() -> str | None:
    return ctypes.util.find_library("seccomp")


def _action(name: str, errno_ret: int | None) -> int:
    if name == "SCMP_ACT_ERRNO":
        return _ACT_ERRNO | ((1 if errno_ret is None else errno_ret) & 0xFFFF)
    actions = {"SCMP_ACT_ALLOW": _ACT_ALLOW, "SCMP_ACT_KILL": _ACT_KILL_THREAD,
               "SCMP_ACT_KILL_THREAD": _ACT_KILL_THREAD,
               "SCMP_ACT_KILL_PROCESS": _ACT_KILL_PROCESS, "SCMP_ACT_TRAP": _ACT_TRAP,
               "SCMP_ACT_LOG": _ACT_LOG}
    return actions[name]


def _arg_groups(args: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    # runc's rule: conditions on distinct arguments form one rule (all must hold); two on the
    # same argument become separate rules (either may hold).
    if len({arg["index"] for arg in args}) == len(args):
        return [list(args)]
    return [[arg] for arg in args]


def load_filter(profile: dict[str, Any]) -> None:
    """Builds the profile's filter for this machine's architecture and loads it."""
    lib = ctypes.CDLL(libseccomp_path() or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_arch_native.restype = ctypes.c_uint32
    arches = [entry["architecture"] for entry in profile.get("archMap", [])]
    arches += profile.get("architectures", [])
    if lib.seccomp_arch_native() not in {_ARCHES.get(arch) for arch in arches}:
        raise SystemExit(f"the profile names no architecture of this machine: {arches}")
    ctx = lib.seccomp_init(_action(profile["defaultAction"], profile.get("defaultErrnoRet")))
    if not ctx:
        raise SystemExit("seccomp_init failed")
    for entry in profile["syscalls"]:
        action = _action(entry["action"], entry.get("errnoRet"))
        for name in entry["names"]:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number == _NR_SCMP_ERROR:
                continue  # a name this libseccomp does not know: docker skips it too
            for group in _arg_groups(entry.get("args") or []):
                conditions = (_ArgCmp * max(len(group), 1))(*[
                    _ArgCmp(arg["index"], _OPS[arg["op"]], arg["value"], arg.get("valueTwo", 0))
                    for arg in group])
                status = lib.seccomp_rule_add_array(ctx, action, number, len(group), conditions)
                if status != 0:
                    raise SystemExit(f"seccomp_rule_add_array({name}) failed: {status}")
    status = lib.seccomp_load(ctx)
    if status != 0:
        raise SystemExit(f"seccomp_load failed: {status}")


def _drop_root() -> None:
    if os.geteuid() != 0:
        return
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def _no_new_privs() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit(f"prctl(PR_SET_NO_NEW_PRIVS): errno {ctypes.get_errno()}")


def _probe(names: Sequence[str]) -> dict[str, int]:
    lib = ctypes.CDLL(libseccomp_path() or "libseccomp.so.2")
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    found = {}
    for name in names:
        number = lib.seccomp_syscall_resolve_name(name.encode())
        ctypes.set_errno(0)
        result = libc.syscall(ctypes.c_long(number), 0, 0, 0, 0, 0, 0)
        found[name] = ctypes.get_errno() if result == -1 else 0
    return found


def run_under(profile: dict[str, Any], argv: Sequence[str], tmp: Path, *,
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Runs `argv` (exec CMD... or probe NAME...) under `profile`, in a child."""
    path = tmp / "profile.json"
    path.write_text(json.dumps(profile))  # read by the child before it drops root
    return subprocess.run([sys.executable, "-S", str(HERE), str(path), *argv],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          cwd="/")


def main(argv: Sequence[str]) -> int:
    profile = json.loads(Path(argv[0]).read_text())
    mode, rest = argv[1], list(argv[2:])
    _drop_root()
    _no_new_privs()
    load_filter(profile)
    if mode == "probe":
        print(json.dumps(_probe(rest)))
        return 0
    os.execv(rest[0], rest)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
