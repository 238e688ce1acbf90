"""Which warm workers a verification uses: this process's own (runners/warm.py), or the
servers a broker lends it (runners/warm_broker.py), or none (cold)."""

from __future__ import annotations

import atexit
import sys
import threading

from runners.sandbox import SandboxPolicy, sandbox_status
from runners.warm import WarmPool, WarmWorkers, switched_on
from runners.warm_broker import client_from_environment

_shared: dict[tuple[str, SandboxPolicy], WarmWorkers] = {}
_shared_lock = threading.Lock()


def wanted(warm: bool | None) -> bool:
    """Whether a run_harness call goes warm: its argument, else this process's switch
    (`enable()` or OPBOT_WARM_WORKERS=1) or a broker to borrow from (OPBOT_WARM_BROKER);
    never where bubblewrap cannot start."""
    chosen = warm if warm is not None else (
        switched_on() or client_from_environment(sys.executable,
                                                 SandboxPolicy.from_environment()) is not None)
    return chosen and sandbox_status().works


def shared_workers(python: str, policy: SandboxPolicy | None) -> WarmPool:
    """This process's warm workers for `python` and `policy`, stopped at exit; a broker's,
    lent, where OPBOT_WARM_BROKER names one this process does not own."""
    chosen = policy or SandboxPolicy.from_environment()
    borrowed = client_from_environment(python, chosen)
    if borrowed is not None:
        return borrowed
    with _shared_lock:
        key = (python, chosen)
        if key not in _shared:
            if not _shared:
                atexit.register(close_shared)
            _shared[key] = WarmWorkers(python, chosen)
        return _shared[key]


def close_shared() -> None:
    with _shared_lock:
        for workers in _shared.values():
            workers.close()
        _shared.clear()
