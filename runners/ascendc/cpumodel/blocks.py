"""Reading a CPU-model run's log: which blocks succeeded and why the others failed.

ICPU_RUN_KF returns normally (and the program exits 0) even when blocks fail: the parent
prints "[SUCCESS][<core>][pid N] exit success!" only for each block that exited 0. A failed
block leaves "[ERROR]..." lines: the real API checks' own message, our model's, or the
signal handler's "error happened!" banner followed by the signal's name.
"""

from __future__ import annotations

import re

# Printed by the twin (templates/cpu_twin.legacy.cpp.in) before the launch.
LAUNCH = re.compile(r"^\[opbot-twin\] launching (?P<blocks>\d+) blocks", re.MULTILINE)
_SUCCESS = re.compile(r"^\[SUCCESS\]\[", re.MULTILINE)
# The devkit's checks: [ERROR][Block_2][AIV_0][file:line][InitBuffer][pid] message
_API_CHECK = re.compile(r"\[ERROR\]\[Block_\d+\]\[[^\]]*\]\[[^\]]*\]\[(?P<api>[^\]]*)\]\[\d+\]\s*"
                        r"(?P<message>.*)")
_BANNER = re.compile(r"\[ERROR\]\[(?P<core>[^\]]+)\]\[pid \d+\] error happened!")
_SIGNAL = re.compile(r"^(?P<signal>SIG\w+ Signal \([^)]*\))")
_NPUCHECK = re.compile(r"\[NPUCHECK ERROR\]:?\s*(?P<message>.*)")
_OTHER_ERROR = re.compile(r"\[ERROR\]\s*(?P<message>.*)")


def launched_blocks(log: str) -> int | None:
    match = LAUNCH.search(log)
    return int(match["blocks"]) if match else None


def succeeded_blocks(log: str) -> int:
    return len(_SUCCESS.findall(log))


def block_errors(log: str) -> list[str]:
    """Each distinct failure message, first seen first (blocks failing alike give one)."""
    found: list[str] = []
    lines = log.splitlines()
    for index, line in enumerate(lines):
        message = _message(line, lines[index + 1] if index + 1 < len(lines) else "")
        if message and message not in found:
            found.append(message)
    return found


def _message(line: str, following: str) -> str | None:
    check = _API_CHECK.search(line)
    if check:
        return f"{check['api']}: {check['message'].strip()}"
    banner = _BANNER.search(line)
    if banner:
        signal = _SIGNAL.match(following.strip())
        what = signal["signal"] if signal else "stopped"
        return f"a block stopped: {what}"
    npucheck = _NPUCHECK.search(line)
    if npucheck:
        return f"NPUCHECK ERROR: {npucheck['message'].strip()}"
    other = _OTHER_ERROR.search(line)
    if other and other["message"].strip():
        return other["message"].strip()
    return None
