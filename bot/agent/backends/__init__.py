"""The backends the agent writes kernels for, keyed by the name users type.

Adding a backend = one package under bot/agent/backends/ and one line here; the CLI, the
`/regen` flags and the issue form read `backend_names()`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from bot.errors import BadInputError
from bot.spec import DEFAULT_TARGETS

if TYPE_CHECKING:
    from bot.agent.backends.base import AgentBackend

# name -> (module, class): a backend is imported when first asked for, so a command that
# only needs the names (`opbot event`, `--help`) does not import every backend's toolchain.
_REGISTRY: dict[str, tuple[str, str]] = {
    "triton": ("bot.agent.backends.triton", "TritonAgent"),
    "ascendc": ("bot.agent.backends.ascendc", "AscendCAgent"),
}
_loaded: dict[str, AgentBackend] = {}
DEFAULT_BACKEND = DEFAULT_TARGETS[0]  # what an op.yaml without `targets` asks for


def backend_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_backend(name: str) -> AgentBackend:
    if name not in _REGISTRY:
        raise BadInputError(f"unknown backend {name!r}: choose from "
                            f"{', '.join(backend_names())}")
    if name not in _loaded:
        module, attribute = _REGISTRY[name]
        _loaded[name] = getattr(importlib.import_module(module), attribute)()
    return _loaded[name]


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
