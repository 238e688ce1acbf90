"""The cyclic garbage collector, tuned for opbot's processes.

Each imports torch (hundreds of thousands of objects that live as long as the process),
then allocates many short-lived ones: the Triton interpreter's per-block values, PyGithub's
models, pytest's reports. CPython's default (a young collection every 700 net allocations)
then spends a tenth of such a process's time in the collector; every 10,000 it spends
about a third of that. Reference counting still frees what holds no cycle at once, so
memory grows only by the cycles made between two collections.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
OLDER_THRESHOLDS = (20, 20)


def tune() -> None:
    """Fewer collections for this process (and the processes it forks)."""
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)


def settle_before_forks() -> None:
    """Everything alive now lives as long as this process: frozen, the collections here and
    in its forks skip it, and a fork's pages stay shared instead of being copied to update
    the collector's headers."""
    gc.collect()
    gc.freeze()
