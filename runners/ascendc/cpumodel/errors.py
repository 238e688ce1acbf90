"""The one error the CPU model raises."""

from __future__ import annotations


class CpuModelError(Exception):
    """The CPU model cannot be built or a run failed; str() says why (for a failed block,
    the block's own message, e.g. the real API check's)."""
