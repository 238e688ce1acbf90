"""Whether the CPU model can run here (cheap: names only, nothing is built)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from runners.ascendc.realapi.sources import real_api_status


@dataclass(frozen=True)
class CpuModelStatus:
    available: bool
    reason: str | None
    devkit_commit: str | None
    tools_commit: str | None


def cpu_model_status() -> CpuModelStatus:
    """Available when the real sources are configured and g++ and ar are on PATH."""
    real = real_api_status()
    if not real.available:
        return CpuModelStatus(False, real.reason, real.devkit_commit, real.tools_commit)
    missing = [tool for tool in ("g++", "ar") if shutil.which(tool) is None]
    if missing:
        return CpuModelStatus(False, f"the CPU model needs {' and '.join(missing)} on PATH",
                              real.devkit_commit, real.tools_commit)
    return CpuModelStatus(True, None, real.devkit_commit, real.tools_commit)
