"""`/regen --backend` reads the backend registry: one backend, several, or a clear refusal."""

from __future__ import annotations

import pytest

from bot.agent.backends import backend_names
from bot.commands import REGEN_HELP, parse_regen


@pytest.mark.parametrize("name", backend_names())
def test_each_registered_backend_is_accepted(name: str) -> None:
    command = parse_regen(f"--backend {name}")
    assert (command.backend, command.problem) == (name, None)


def test_several_backends_side_by_side_are_accepted_once_each() -> None:
    names = ",".join(reversed(backend_names()))
    command = parse_regen(f"--backend={names},{backend_names()[0]}")
    assert command.problem is None
    assert command.backend == names


@pytest.mark.parametrize("value", ["cuda", "triton,cuda", ",", "TRITON;rm -rf /"])
def test_an_unknown_backend_is_refused_naming_the_known_ones(value: str) -> None:
    command = parse_regen(f"--backend '{value}'")
    assert command.problem is not None
    assert all(name in command.problem for name in backend_names())


def test_the_usage_lists_the_registry() -> None:
    assert all(name in REGEN_HELP.usage for name in backend_names())


def test_an_echoed_value_cannot_render_an_image_or_a_mention() -> None:
    command = parse_regen("--backend '![x](https://evil.example/p.png) @org/admins'")
    assert command.problem is not None
    assert "![" not in command.problem
    assert " @org" not in command.problem
    assert "\\@org" in command.problem


def test_an_echoed_value_is_cut_short() -> None:
    command = parse_regen("--backend " + "x" * 100_000)
    assert command.problem is not None
    assert len(command.problem) < 600


def test_a_backend_given_twice_is_an_error_not_a_silent_choice() -> None:
    command = parse_regen("--backend triton --backend ascendc")
    assert command.problem is not None
    assert "twice" in command.problem
