"""The judge's watchdog blames the worker whose process tree grew, not the one it waits on.

The watchdog checks both workers' trees while the judge waits on either: a candidate that
forks past the limit while the judge waits on a (slow) reference must fail as the
candidate, never as "the reference's worker was stopped".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.base import VerifyRequest
from runners.sandbox import SandboxPolicy, sandbox_status
from runners.verify import run_harness
from tests.support import CANDIDATES

RELU = CANDIDATES / "refs" / "relu.py"
GOOD = CANDIDATES / "relu__good_tutorial.py"
PROCESS_CAP = 30

pytestmark = pytest.mark.skipif(not sandbox_status().works,
                                reason="bubblewrap cannot start a sandbox here")

# The candidate forks past the cap at import, its children sleeping; then it is correct.
FORKING = """
import os, time
for _ in range(40):
    try:
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
    except OSError:
        break
"""


def _slow_reference(tmp_path: Path) -> Path:
    """The ReLU reference, slow to import: the judge waits on it while the candidate forks."""
    path = tmp_path / "slow_relu.py"
    path.write_text("import time\ntime.sleep(8)\n" + RELU.read_text(encoding="utf-8"),
                    encoding="utf-8")
    return path


def test_a_candidates_fork_bomb_is_the_candidates_failure_cold(tmp_path: Path) -> None:
    candidate = tmp_path / "forking.py"
    candidate.write_text(FORKING + "\n" + GOOD.read_text(encoding="utf-8"), encoding="utf-8")
    request = VerifyRequest(reference=_slow_reference(tmp_path), candidate=candidate,
                            timeout_s=90, seed=3, static_scan=False)
    result = run_harness(request, policy=SandboxPolicy(processes=PROCESS_CAP), warm=False)
    assert result.status == "failed", result
    messages = [item.message for item in result.reasons]
    assert [item.check for item in result.reasons] == ["crash"], messages
    assert "the candidate's worker was stopped" in messages[0], messages
    assert f"more than {PROCESS_CAP} processes" in messages[0], messages
