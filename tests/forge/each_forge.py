"""Fixtures for modules that run every test on both forges: a module imports the two
(`from tests.forge.each_forge import each_forge, fake_server_of_kind`); their fixture names
are `kind` and `server`, so each test runs once per forge, each forge on a fake server of
its own (GitHub's traffic checked against its OpenAPI description)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakeforge import FakeServer
from tests.support_forge import KINDS, ForgeKind, fake_server


@pytest.fixture(scope="module", params=sorted(KINDS), name="kind")
def each_forge(request: pytest.FixtureRequest) -> ForgeKind:
    return KINDS[request.param]


@pytest.fixture(scope="module", name="server")
def fake_server_of_kind(kind: ForgeKind) -> Iterator[FakeServer]:
    with fake_server(github_spec=kind.name == "github") as srv:
        yield srv
