"""A model's reply -> the candidate's files.

Fenced code blocks carry the files, one per block, the file name in the info string
(```` ```python file=model_new.py ````); a single plain block is a one-file candidate. Plain
replies must work: many OpenAI-compatible servers have no tool calling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CANDIDATE_FILE = "model_new.py"
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                    re.DOTALL | re.MULTILINE)
_FILE_NAME = re.compile(r"(?:file(?:name)?\s*[=:]\s*[\"']?)?(?P<name>[\w./-]+\.\w+)[\"']?$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][\w.-]*$")


class ReplyError(Exception):
    """The reply holds no usable candidate; the message is feedback for the model."""


@dataclass(frozen=True)
class CandidateFiles:
    files: dict[str, str]
    main: str  # the file defining ModelNew

    @property
    def source(self) -> str:
        return self.files[self.main]


def _file_name(info: str) -> str | None:
    for word in reversed(info.split()):
        match = _FILE_NAME.fullmatch(word)
        if match:
            name = match.group("name").rsplit("/", 1)[-1]
            return name if _SAFE_NAME.match(name) else None
    return None


def fenced_blocks(text: str) -> list[tuple[str, str | None, str]]:
    """Every fenced block of a reply: (info string, the file it names or None, body)."""
    return [(match.group("info").strip(), _file_name(match.group("info").strip()),
             match.group("body")) for match in _FENCE.finditer(text)]


def parse_reply(text: str) -> CandidateFiles:
    """The files of a reply; ReplyError says what is missing."""
    blocks = [(match.group("info").strip(), match.group("body"))
              for match in _FENCE.finditer(text)]
    code = [(info, body) for info, body in blocks
            if not info or info.split()[0].lower() in ("python", "py", "python3")
            or _file_name(info)]
    if not code:
        raise ReplyError("the reply has no fenced code block: answer with the whole candidate "
                         f"in one ```python file={CANDIDATE_FILE} block")
    files: dict[str, str] = {}
    unnamed: list[str] = []
    for info, body in code:
        name = _file_name(info)
        if name:
            files[name] = body
        else:
            unnamed.append(body)
    if not files and len(unnamed) == 1:
        files[CANDIDATE_FILE] = unnamed[0]
    elif not files:
        with_model = [body for body in unnamed if "class ModelNew" in body]
        if len(with_model) != 1:
            raise ReplyError("the reply has several code blocks without file names: put the "
                             f"whole candidate in one ```python file={CANDIDATE_FILE} block")
        files[CANDIDATE_FILE] = with_model[0]
    main = next((name for name, body in files.items() if "class ModelNew" in body), None)
    if main is None:
        raise ReplyError("no file of the reply defines class ModelNew (same constructor and "
                         "forward as the reference's Model)")
    return CandidateFiles(files=files, main=main)
