"""Where the Ascend toolchain fixtures live (tests/data/ascend/SOURCES.md says why).

* `fixture(relative)`: a file committed under tests/data/ascend, the project's own
  (`own/<relative>`, written here in the toolchain's formats) or a licensed verbatim sample
  (`<relative>`). A missing one is a broken checkout: it raises.
* `real_sample(relative)`: a real, unlicensed toolchain output from the shared folder beside the
  checkout (`<repo>/../shared/data/ascend-samples/<relative>`; `OPBOT_SHARED_DATA` names another
  `data` folder). It is never copied into the repository; where it is absent the calling test is
  skipped with a reason that names the missing path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runners.ascendc.package import Step
from runners.ascendc.steps import StepOutcome
from runners.base import CaseResult, StageResult, VerifyRequest, VerifyResult
from tests.support import DATA, REPO

ASCEND = DATA / "ascend"
OWN = ASCEND / "own"
SHARED_DATA_VARIABLE = "OPBOT_SHARED_DATA"


def fixture(relative: str) -> Path:
    """A committed fixture: `own/<relative>` first, then a licensed sample at `<relative>`."""
    for base in (OWN, ASCEND):
        path = base / relative
        if path.is_file():
            return path
    raise FileNotFoundError(f"no fixture {relative!r} under {OWN} or {ASCEND}")


def shared_samples() -> Path:
    """The folder of real samples: `$OPBOT_SHARED_DATA/ascend-samples`, by default the shared
    folder beside the checkout."""
    data = os.environ.get(SHARED_DATA_VARIABLE) or str(REPO.parent / "shared" / "data")
    return Path(data) / "ascend-samples"


def real_sample(relative: str) -> Path:
    """A real sample from the shared folder, or a skip that says which path is missing."""
    path = shared_samples() / relative
    if not path.is_file():
        pytest.skip(f"real sample not available: {path} is missing (unlicensed samples stay in "
                    f"the shared folder; set {SHARED_DATA_VARIABLE} to its data directory)")
    return path


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


class RecordingStepRunner:
    """Plays a runner: each step answers from a table; a successful build leaves the
    package's library (`source`'s bytes, else a stub), a successful profile step the files
    of `profile_files` (path relative to the package folder -> text), as msprof would."""

    def __init__(self, outcomes: dict[str, tuple[int, str]] | None = None,
                 source: Path | None = None,
                 profile_files: dict[str, str] | None = None) -> None:
        self.outcomes = outcomes or {}
        self.source = source
        self.profile_files = profile_files or {}
        self.steps: list[Step] = []

    def __call__(self, step: Step, cwd: Path) -> StepOutcome:
        self.steps.append(step)
        code, output = self.outcomes.get(step.name, (0, f"{step.name}: ok"))
        if step.name == "build" and code == 0:
            op = json.loads((cwd / "opbot.json").read_text(encoding="utf-8"))["op"]
            library = cwd / "build-npu" / f"lib{op}_ops.so"
            library.parent.mkdir(exist_ok=True)
            library.write_bytes(self.source.read_bytes() if self.source else b"\x7fELF")
        if step.name == "profile" and code == 0:
            for relative, text in self.profile_files.items():
                (cwd / relative).parent.mkdir(parents=True, exist_ok=True)
                (cwd / relative).write_text(text, encoding="utf-8")
        return StepOutcome(step.name, code, 0.5, output, timed_out=code == 124)


PASSED = VerifyResult(status="passed", reasons=[], cases=[
    CaseResult("main", [[16, 16384]], ["float32"], 11, True, 0.0, 0.0)],
    stages=[StageResult("check", True, 0.2)], device="npu (Ascend)", seed=7)


class RecordingJudge:
    """Plays the judge: records each request (and the shim's text then), answers `verdict`."""

    def __init__(self, verdict: VerifyResult = PASSED) -> None:
        self.verdict = verdict
        self.requests: list[VerifyRequest] = []
        self.shims: list[str] = []

    def __call__(self, request: VerifyRequest) -> VerifyResult:
        self.requests.append(request)
        self.shims.append(request.candidate.read_text(encoding="utf-8"))
        return self.verdict
