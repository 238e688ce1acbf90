"""The Triton backend: one candidate file, run where Triton can run.

- a CUDA GPU: Triton compiles the kernels;
- an Ascend NPU with torch_npu and triton-ascend: the same, through triton-ascend;
- otherwise the CPU, through Triton's interpreter (TRITON_INTERPRET=1), which every test
  here uses. The worker picks the device at start-up; nothing here requires any of them.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Literal

from runners.base import Availability, VerifyRequest, VerifyResult
from runners.verify import run_harness

_MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.MULTILINE)


class CandidateNotFoundError(Exception):
    """No candidate file could be found where the user pointed."""


def resolve_candidate(path: Path) -> Path:
    """A `.py` defining ModelNew, or an operator package folder holding `triton/<name>.py`."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise CandidateNotFoundError(f"{path}: no such file or folder")
    for folder in (path / "triton", path):
        for candidate in sorted(folder.glob("*.py")):
            try:
                text = candidate.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if _MODEL_NEW.search(text):
                return candidate
    raise CandidateNotFoundError(
        f"{path}: no Triton candidate here (expected triton/<name>.py defining class ModelNew)")


class TritonBackend:
    name: Literal["triton"] = "triton"

    def availability(self) -> Availability:
        if importlib.util.find_spec("triton") is None:
            return Availability(False, "none", "triton is not installed (pip install "
                                "'opbot[triton]', or triton-ascend on Ascend runners)")
        return Availability(True, "auto", "CUDA or NPU when present, else the CPU interpreter")

    def verify(self, request: VerifyRequest) -> VerifyResult:
        return run_harness(request)
