"""The offline generator through its sandboxed worker and the backend registry: the same
call for every backend, the backend's knobs passed as options."""

from __future__ import annotations

import pytest

from bot.agent.offline.run import generate_in_worker
from runners.ascendc.package import kernel_file_name
from tests.support import REFS

RELU = REFS / "kb_01_relu.py"


@pytest.fixture(autouse=True)
def _no_cached_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPBOT_OFFLINE_CACHE", "0")  # the worker itself is under test


def test_the_worker_runs_the_triton_generator() -> None:
    result = generate_in_worker(RELU, op_name="relu", init_args=None, cases=[])
    assert result.status == "generated", result.reason
    assert result.kernels
    assert "import triton" in result.source


def test_the_worker_runs_the_ascendc_generator_with_its_generation() -> None:
    result = generate_in_worker(RELU, op_name="relu", init_args=None, cases=[],
                                backend="ascendc", generation="asc")
    assert result.status == "generated", result.reason
    assert f"ascendc/{kernel_file_name('relu', 'asc')}" in result.files


def test_an_unknown_backend_is_an_error_naming_the_known_ones() -> None:
    result = generate_in_worker(RELU, op_name="relu", init_args=None, cases=[],
                                backend="nosuch")
    assert result.status == "error"
    assert "nosuch" in result.reason
    assert "triton" in result.reason
