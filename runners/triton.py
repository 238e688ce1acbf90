"""The Triton backend: one candidate file, run where Triton can run.

- a CUDA GPU: Triton compiles the kernels;
- an Ascend NPU with torch_npu and triton-ascend: the same, through triton-ascend;
- otherwise the CPU, through Triton's interpreter (TRITON_INTERPRET=1), which every test
  here uses. The worker picks the device at start-up; nothing here requires any of them.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import replace
from importlib import metadata
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


def _installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


class TritonBackend:
    name: Literal["triton"] = "triton"

    def __init__(self, version_of: Callable[[str], str | None] = _installed,
                 cann_version: Callable[[], str | None] | None = None) -> None:
        self._version_of = version_of
        self._cann_version = cann_version

    def availability(self) -> Availability:
        if importlib.util.find_spec("triton") is None:
            return Availability(False, "none", "triton is not installed (pip install "
                                "'opbot[triton]', or triton-ascend on Ascend runners)")
        ascend = self._version_of("triton-ascend")
        if ascend is not None:
            return self._ascend_availability(ascend)
        return Availability(True, "auto", "CUDA or NPU when present, else the CPU interpreter")

    def _ascend_availability(self, triton_ascend: str) -> Availability:
        """triton-ascend compiles through CANN: an unsupported pair fails in odd ways."""
        from runners.ascendc.detect import detect_cann, triton_ascend_pairing

        cann = self._cann_version() if self._cann_version else detect_cann().version
        if cann is None:
            return Availability(True, "auto", f"triton-ascend {triton_ascend} without CANN: "
                                "the CPU interpreter only")
        ok, message = triton_ascend_pairing(triton_ascend, cann)
        return Availability(ok, "npu" if ok else "none", message)

    def verify(self, request: VerifyRequest) -> VerifyResult:
        # Triton kernels launch through Triton's launcher, which the run-time guard counts,
        # and compile on their first launch.
        return run_harness(replace(request, expects_kernel_launches=True, package_ops=False,
                                   compiles_on_first_launch=True))
