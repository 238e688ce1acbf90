"""Registers the markers of the gelu tests (written by opbot)."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "npu: needs an Ascend NPU with CANN and torch_npu (pytest -m npu)")
