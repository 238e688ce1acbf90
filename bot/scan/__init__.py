"""The nightly scan: every operator of a repository, each backend, re-verified with this
machine's toolchain (bot/scan/checks.py); the toolchain recorded and compared with the last
night's (toolchain.py, state.py); what a toolchain change broke regenerated, one pull
request per operator within the policy's nightly cap, with forge etiquette (nightly.py);
all of it shown in one dashboard edited in place (dashboard.py)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from bot.scan.checks import ScanRow, Verify, check_operator, relative_to, verifier
from bot.scan.toolchain import ToolchainRecord, record_toolchain

__all__ = ["ScanRow", "ToolchainRecord", "local_actions", "record_toolchain",
           "scan_checkout", "verifier"]


def scan_checkout(root: Path, progress: Callable[[str], None] = lambda _m: None, *,
                  verify: Verify | None = None, parallel: int = 2) -> list[ScanRow]:
    """Every operator under `root`/ops, each backend re-verified, `parallel` at once, in
    the operators' order."""
    check = verify or verifier()
    op_files = sorted(root.glob("ops/*/op.yaml"))

    def one(op_yaml: Path) -> list[ScanRow]:
        progress(f"verifying {op_yaml.parent.name}")
        return [relative_to(row, root) for row in check_operator(op_yaml, check, root)]

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return [row for rows in pool.map(one, op_files) for row in rows]


_LOCAL_ACTIONS = {"passed": "none", "failed": "regenerate"}


def local_actions(rows: list[ScanRow]) -> list[ScanRow]:
    """Actions for a scan without a forge: what failed is to be regenerated; what could
    not be judged here (unverified, invalid, missing) is skipped."""
    return [replace(row, action=_LOCAL_ACTIONS.get(row.status, "skip")) for row in rows]
