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
