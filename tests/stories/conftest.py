"""Story tests drive `opbot serve` through the fake forge's webhooks (support.py).

Stories share one conversation per module and forge (a module-scoped fixture): run them
in one process, or with `-n N --dist loadscope` so that a module stays on one worker.
"""

from __future__ import annotations

import pytest

from tests.fakeforge.hooks import Front

FRONTS: list[Front] = ["github", "gitlab"]


@pytest.fixture(scope="module", params=FRONTS)
def front(request: pytest.FixtureRequest) -> Front:
    """The forge a story plays on (GitHub: opbot is an App; GitLab: a personal token)."""
    found: Front = request.param
    return found
