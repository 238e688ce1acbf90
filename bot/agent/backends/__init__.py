"""The backends the agent writes kernels for, keyed by the name users type.

Adding a backend = one package under bot/agent/backends/ and one line here; the CLI, the
`/regen` flags and the issue form read `backend_names()`.
"""

from __future__ import annotations

from bot.agent.backends.ascendc import AscendCAgent
from bot.agent.backends.base import AgentBackend
from bot.agent.backends.triton import TritonAgent
from bot.errors import BadInputError
from bot.spec import DEFAULT_TARGETS

_REGISTRY: dict[str, AgentBackend] = {
    "triton": TritonAgent(),
    "ascendc": AscendCAgent(),
}
DEFAULT_BACKEND = DEFAULT_TARGETS[0]  # what an op.yaml without `targets` asks for


def backend_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_backend(name: str) -> AgentBackend:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise BadInputError(f"unknown backend {name!r}: choose from "
                            f"{', '.join(backend_names())}") from None


def parse_backends(text: str) -> list[str]:
    """`ascendc,triton` -> the names, each known, each once, in the order given."""
    names: list[str] = []
    for word in text.split(","):
        name = word.strip().lower()
        if not name:
            continue
        get_backend(name)
        if name not in names:
            names.append(name)
    if not names:
        raise BadInputError(f"no backend named: choose from {', '.join(backend_names())}")
    return names
