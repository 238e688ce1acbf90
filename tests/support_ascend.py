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

import os
from pathlib import Path

import pytest

from runners.ascendc.backend import StepOutcome
from runners.ascendc.package import Step
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


JUNIT_PASS = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_gelu_npu" name="test_npu_matches_reference[shape0-float32]"/>
<testcase classname="tests.test_gelu_npu" name="test_npu_matches_reference[tail33-float16]"/>
</testsuite></testsuites>"""


class RecordingStepRunner:
    """Plays a runner: each step answers from a table; the test step writes a JUnit file."""

    def __init__(self, outcomes: dict[str, tuple[int, str]] | None = None,
                 junit: str | None = JUNIT_PASS, bench: str = "") -> None:
        self.outcomes = outcomes or {}
        self.junit = junit
        self.bench = bench
        self.steps: list[Step] = []

    def __call__(self, step: Step, cwd: Path) -> StepOutcome:
        self.steps.append(step)
        code, output = self.outcomes.get(step.name, (0, f"{step.name}: ok"))
        if step.name == "test" and self.junit is not None:
            report = next(arg.split("=", 1)[1] for arg in step.argv
                          if arg.startswith("--junitxml="))
            (cwd / report).parent.mkdir(parents=True, exist_ok=True)
            (cwd / report).write_text(self.junit)
        if step.name == "time":
            output = self.bench
        return StepOutcome(step.name, code, 0.5, output, timed_out=code == 124)
