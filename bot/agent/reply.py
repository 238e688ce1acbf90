"""Reading a model's reply: fenced blocks and the files they name (backend-neutral).

Fenced code blocks carry the files, one per block, the file name in the info string
(```` ```python file=model_new.py ````); a single plain block is a one-file candidate. Plain
replies must work: many OpenAI-compatible servers have no tool calling.
"""

from __future__ import annotations

import re

FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                    re.DOTALL | re.MULTILINE)
_FILE_NAME = re.compile(r"(?:file(?:name)?\s*[=:]\s*[\"']?)?(?P<name>[\w./-]+\.\w+)[\"']?$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][\w.-]*$")


class ReplyError(Exception):
    """The reply holds no usable candidate; the message is feedback for the model."""


def file_name(info: str) -> str | None:
    for word in reversed(info.split()):
        match = _FILE_NAME.fullmatch(word)
        if match:
            name = match.group("name").rsplit("/", 1)[-1]
            return name if _SAFE_NAME.match(name) else None
    return None


def fenced_blocks(text: str) -> list[tuple[str, str | None, str]]:
    """Every fenced block of a reply: (info string, the file it names or None, body)."""
    return [(match.group("info").strip(), file_name(match.group("info").strip()),
             match.group("body")) for match in FENCE.finditer(text)]
