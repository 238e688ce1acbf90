"""Test-wide setup: Triton runs through its CPU interpreter in the test process too; the
fake forge's fixtures for the modules that use it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# Before anything imports triton: @triton.jit reads it when a kernel is defined.
os.environ.setdefault("TRITON_INTERPRET", "1")
# The real-header type-check and the CPU model cost seconds per Ascend C package: the tests
# that exercise them switch them on (runners/ascendc/cpu_verify.py SWITCH); the rest judge
# packages as a machine without them does.
os.environ.setdefault("OPBOT_ASCENDC_REAL_CHECKS", "0")

if TYPE_CHECKING:
    from tests.fakeforge import FakeForge, FakeServer
    from tests.fakeforge.scenario import World

# The fake forge (and PyGithub, python-gitlab) load only in the modules that use it.


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    """One fake forge server per module; a module with `GITHUB_SPEC = False` talks GitLab
    only and does without GitHub's OpenAPI description."""
    from tests.support_forge import fake_server

    with fake_server(github_spec=getattr(request.module, "GITHUB_SPEC", True)) as srv:
        yield srv


@pytest.fixture
def fake(server: FakeServer, tmp_path: Path) -> Iterator[FakeForge]:
    """A fresh fake forge state for one test, checked for honesty afterwards."""
    from tests.support_forge import fake_forge

    with fake_forge(server, tmp_path / "forge") as forge:
        yield forge


@pytest.fixture
def world(fake: FakeForge) -> World:
    """The standard world (tests/fakeforge/scenario.py) on the fake forge."""
    from tests.fakeforge.scenario import standard_world

    return standard_world(fake)
