"""Run a command as a child and pass signals on to it: the image's PID 1 (entrypoint.sh execs
this when it must not exec the command itself).

usage: python3 -I -S forward_signals.py COMMAND [ARG...]   (Python 3.9 or newer)

The command runs in a process group of its own; the signals that concern it (TERM, INT,
HUP, QUIT, USR1, ... : FORWARDED) are passed on to that whole group (with a CONT, so that a
stopped command gets them too), orphans re-parented to this process are reaped, and the exit
status is the command's (128+N when signal N killed it). A script without a #! line runs
under /bin/sh, as a shell's exec would run it.

Signals are blocked and taken with sigwaitinfo, never caught by a handler: once this script
runs, a signal that arrives at any moment -- before the command has started, while a child
is being reaped -- is either passed on or still pending, never lost. (The shell loop this
replaced could miss a signal that arrived just before `wait` blocked, and wait for ever.)
What this cannot close: as PID 1, a signal in the ~50 ms between bash's exec and the mask
below is dropped by the kernel (PID 1 gets only the signals it handles); `docker run --init`
has no such gap. Standard library only, so that it runs with -I -S.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping

# Every signal a process can catch, as tini passes them on, but those about this process
# itself: its children (CHLD), its own faults, its own writes (PIPE, XFSZ), its terminal
# (TSTP, TTIN, TTOU) and the CONT it sends after each forwarded signal.
OWN = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, signal.SIGCONT,
                 signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGTRAP,
                 signal.SIGSYS, signal.SIGABRT, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTSTP,
                 signal.SIGTTIN, signal.SIGTTOU})
FORWARDED = frozenset(signal.valid_signals()) - OWN
WATCHED = FORWARDED | {signal.SIGCHLD}
EXIT_USAGE = 64
EXIT_CANNOT_RUN = 126
EXIT_NOT_FOUND = 127
# Python's start-up coerces a C locale (PEP 538), which -I cannot switch off: entrypoint.sh
# hands over LC_CTYPE as the command must see it ("-" when it was unset).
LC_CTYPE_HANDOVER = "OPBOT_FORWARD_LC_CTYPE"


def exit_status(wait_status: int) -> int:
    """A shell's exit status for a waitpid status: the code, or 128+N for signal N."""
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


def command_environment(given: Mapping[str, str]) -> dict[str, str]:
    """The environment the entrypoint had, before Python's locale coercion."""
    environ = dict(given)
    handed = environ.pop(LC_CTYPE_HANDOVER, None)
    if handed == "-":
        environ.pop("LC_CTYPE", None)
    elif handed is not None:
        environ["LC_CTYPE"] = handed
    return environ


def _as_a_fresh_exec() -> None:
    # In the child before exec: a group of its own (so that a signal reaches the whole
    # command), nothing blocked (the mask would survive the exec).
    os.setpgid(0, 0)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def start(argv: list[str]) -> int:
    """Starts argv in a new process group with default signals and mask; returns its pid.
    fork and exec, not posix_spawn: glibc's would leave its own signals ignored."""
    try:
        return _spawn(argv)
    except OSError as error:
        if error.errno != errno.ENOEXEC:
            raise
    return _spawn(["/bin/sh", shutil.which(argv[0]) or argv[0], *argv[1:]])


def _spawn(argv: list[str]) -> int:
    child = subprocess.Popen(argv, env=command_environment(os.environ),
                             restore_signals=True, close_fds=False,
                             preexec_fn=_as_a_fresh_exec)  # noqa: PLW1509 - one thread here
    # Reaped by waitpid(-1) below: the Popen object must never wait for it itself.
    child.returncode = 0
    return child.pid


def reap(command: int) -> int | None:
    """Reaps every child that has ended; the command's exit status once it is among them."""
    status: int | None = None
    while True:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == command:
            status = exit_status(wait_status)


def forward_until_exit(command: int) -> int:
    while True:
        number = signal.sigwaitinfo(WATCHED).si_signo
        if number == signal.SIGCHLD:
            status = reap(command)
            if status is not None:
                return status
            continue
        # The group may be gone already: the command ended and its SIGCHLD is next.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(command, number)
            # A stopped process keeps a TERM pending until it runs again.
            os.killpg(command, signal.SIGCONT)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: forward_signals.py COMMAND [ARG...]", file=sys.stderr)
        return EXIT_USAGE
    # Blocked before the command starts, so that nothing from here on is missed.
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    # An inherited SIG_IGN would have the kernel reap the command and send no SIGCHLD.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        command = start(argv)
    except (OSError, ValueError) as error:
        why = error.strerror if isinstance(error, OSError) else "not a command name"
        print(f"opbot-entrypoint: cannot run {argv[0]!r}: {why}", file=sys.stderr)
        return EXIT_NOT_FOUND if isinstance(error, (FileNotFoundError, ValueError)) \
            else EXIT_CANNOT_RUN
    return forward_until_exit(command)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        # SIGINT before the mask was set: the command never started.
        sys.exit(128 + signal.SIGINT)
