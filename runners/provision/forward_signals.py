"""Run a command as a child and pass signals on to it: the image's PID 1 (entrypoint.sh execs
this when it must not exec the command itself).

usage: python3 -I -S forward_signals.py COMMAND [ARG...]

The command runs in a process group of its own; TERM, INT, HUP and QUIT are passed on to
that whole group, orphans re-parented to this process are reaped, and the exit status is the
command's (128+N when signal N killed it).

Signals are blocked and taken with sigwaitinfo, never caught by a handler: a signal that
arrives at any moment -- before the command has started, while a child is being reaped -- is
either passed on or still pending, never lost. (The shell loop this replaces could miss a
signal that arrived just before `wait` blocked, and then wait for ever.) Standard library
only, so that it runs with -I -S under whichever python3 CANN's environment puts first.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

FORWARDED = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})
WATCHED = FORWARDED | {signal.SIGCHLD}
# Python ignores these; an exec'd command must get them back at their defaults.
RESTORED_TO_DEFAULT = (signal.SIGPIPE, signal.SIGXFSZ)
EXIT_USAGE = 64
EXIT_CANNOT_RUN = 126
EXIT_NOT_FOUND = 127


def exit_status(wait_status: int) -> int:
    """A shell's exit status for a waitpid status: the code, or 128+N for signal N."""
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


def start(argv: list[str]) -> int:
    """Starts argv in a new process group, with no signal blocked; returns its pid."""
    return os.posix_spawnp(argv[0], argv, os.environ, setpgroup=0, setsigmask=(),
                           setsigdef=RESTORED_TO_DEFAULT)


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
        else:
            # The group may be gone already: the command ended and its SIGCHLD is next.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(command, number)


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
    except OSError as error:
        print(f"opbot-entrypoint: cannot run {argv[0]}: {error.strerror}", file=sys.stderr)
        return EXIT_NOT_FOUND if isinstance(error, FileNotFoundError) else EXIT_CANNOT_RUN
    return forward_until_exit(command)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        # SIGINT before the mask was set: the command never started.
        sys.exit(128 + signal.SIGINT)
