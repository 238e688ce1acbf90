"""Without the real sources the CPU model says why, and building raises that reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.ascendc.cpumodel import CpuModelError, build_library, cpu_model_status


def test_absent_sources_make_the_model_unavailable_with_a_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPBOT_ASCEND_REAL_API", str(tmp_path))
    monkeypatch.setenv("OPBOT_CACHE_DIR", str(tmp_path / "cache"))
    status = cpu_model_status()
    assert not status.available
    assert status.reason is not None
    assert "asc-devkit-<commit>.tar.xz" in status.reason
    with pytest.raises(CpuModelError, match="needs the real Ascend C sources"):
        build_library()
    assert not (tmp_path / "cache" / "cpumodel").exists()
