"""A model's reply -> the Ascend C files it writes.

Each file comes in a fenced block naming it (```` ```cpp file=gelu_kernel.cpp ````); one
unnamed C++ block alone is taken as the kernel. Only the files the model owns are accepted
(bot/agent/backends/ascendc/skeleton.py says which and why): a reply that writes the build, the
tests or anything else is rejected as a whole, so that a draft is never judged by tests
or a build the model changed. The kernel is required; the tiling header and the binding
may be left out, and then keep their current text.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.agent.reply import ReplyError, fenced_blocks

_CPP_LANGUAGES = frozenset({"", "cpp", "c++", "cc", "cxx", "c", "asc", "h", "hpp"})
RENDERED_BY_OPBOT = ("CMakeLists.txt, build.sh, the CPU twin, the tests, the benchmark and "
                     "opbot.json")


def _language(info: str) -> str:
    words = info.split()
    return words[0].lower() if words and "=" not in words[0] else ""


def _rejection(names: Sequence[str], writable: Sequence[str]) -> ReplyError:
    return ReplyError(
        f"the reply writes {', '.join(names)}: a reply may write only {', '.join(writable)} "
        f"({RENDERED_BY_OPBOT} are rendered by opbot and cannot be replaced). Send the "
        "complete files you may write, each in a ```cpp file=NAME block")


def parse_ascendc_reply(text: str, writable: Sequence[str]) -> dict[str, str]:
    """The files of a reply, by name; ReplyError says what is wrong with it."""
    kernel = writable[0]
    named: dict[str, str] = {}
    unnamed: list[str] = []
    for info, name, body in fenced_blocks(text):
        if name is not None:
            named[name] = body
        elif _language(info) in _CPP_LANGUAGES:
            unnamed.append(body)
    foreign = [name for name in named if name not in writable]
    if foreign:
        raise _rejection(foreign, writable)
    if kernel not in named:
        if named or len(unnamed) != 1:
            raise ReplyError(f"the reply has no ```cpp file={kernel} block: send the complete "
                             f"kernel (and, if you change them, {', '.join(writable[1:])}), "
                             "each in a fenced block whose info string names the file")
        named[kernel] = unnamed[0]
    return named
