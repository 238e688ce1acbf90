"""The Ascend C offline generator's entry: one worker job in, one result out (no CANN).

The package itself (golden files, lint, CPU twins) is tested in test_ascendc_package.py;
this covers what the worker sees: the toolchain option, unsupported and failing references.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agent.backends.ascendc.offline import generate_offline
from bot.agent.offline.job import OfflineJob
from runners.ascendc.package import kernel_file_name
from tests.support import REFS, reference_source


@pytest.mark.parametrize("generation", ["legacy", "asc"])
def test_the_generation_option_picks_the_toolchain_layout(generation: str) -> None:
    job = OfflineJob(REFS / "kb_01_relu.py", "relu", options={"generation": generation})
    result = generate_offline(job)
    assert result.status == "generated", result.reason
    assert f"ascendc/{kernel_file_name('relu', generation)}" in result.files


def test_without_the_option_the_package_is_legacy() -> None:
    result = generate_offline(OfflineJob(REFS / "kb_02_gelu.py", "gelu"))
    assert f"ascendc/{kernel_file_name('gelu', 'legacy')}" in result.files


def test_a_broadcasting_reference_is_unsupported_naming_why() -> None:
    result = generate_offline(OfflineJob(REFS / "kb_06_broadcast_fma.py", "fma"))
    assert result.status == "unsupported"
    assert any("broadcast" in op for op in result.unsupported_ops)
    assert not result.files


def test_a_reference_that_fails_is_an_error(tmp_path: Path) -> None:
    reference = tmp_path / "reference.py"
    reference.write_text(reference_source("x", "torch.randn(4, 8)",
                                          prelude="raise RuntimeError('boom')"),
                         encoding="utf-8")
    result = generate_offline(OfflineJob(reference, "broken"))
    assert result.status == "error"
    assert "RuntimeError: boom" in result.reason
