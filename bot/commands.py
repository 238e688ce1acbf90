"""Slash commands in comments, Prow-style: anchored patterns, each handler with its help.

A command is the first word of a line of a paragraph as the forge renders the comment
(never inside a quote, code, a list or HTML). Its
arguments are split with shlex and parsed strictly: an unknown flag or a bad value is an
error whose message shows the usage (and a "did you mean" when one is close).
"""

from __future__ import annotations

import difflib
import re
import shlex
import unicodedata
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token

from bot.agent.backends import backend_names, parse_backends
from bot.errors import BadInputError
from bot.text import quoted

_BACKEND_USAGE = "|".join(backend_names())
MAX_HINT_CHARS = 2000


@dataclass(frozen=True)
class CommandHelp:
    name: str
    usage: str
    description: str
    who: str
    examples: tuple[str, ...]

    def render(self) -> str:
        # Examples sit in a fence: the bot's own help must never read as a command.
        examples = "\n".join(self.examples)
        return (f"`{self.usage}`: {self.description} Who may use it: {self.who}.\n"
                f"Examples:\n```\n{examples}\n```")


@dataclass(frozen=True)
class RegenCommand:
    backend: str | None = None
    hint: str | None = None
    force: bool = False
    problem: str | None = None  # set when the command was malformed: the reply says this

    def to_json(self) -> dict[str, object]:
        return {"backend": self.backend, "hint": self.hint, "force": self.force,
                "problem": self.problem}


REGEN_HELP = CommandHelp(
    name="regen",
    usage=f'/regen [--backend {_BACKEND_USAGE}[,...]] [--hint "..."] [--force]',
    description="regenerate the operator's kernel on this pull request or op request; "
    "--hint passes notes to the model, --force overrides commits a person pushed to the "
    "bot's branch.",
    who="people with write permission on the repository",
    examples=("/regen", f"/regen --backend {backend_names()[0]}",
              f"/regen --backend {','.join(backend_names())}",
              '/regen --hint "use a two-pass softmax"', "/regen --force"),
)

# A command is the first word of a line of a paragraph as the forge renders it (CommonMark
# plus GitHub's tables): never in a code block or span, a quote (lazy continuation lines
# included), a list, a table, HTML or a link definition — what a reader sees as text is
# what the bot obeys, and what a reader sees as an example is not.
_MARKDOWN = MarkdownIt("commonmark").enable("table")
_COMMAND_LINE = re.compile(r"^/(?P<name>[A-Za-z][\w-]*)(?P<args>[ \t].*)?$")
_NESTING = {"blockquote_open": 1, "blockquote_close": -1, "bullet_list_open": 1,
            "bullet_list_close": -1, "ordered_list_open": 1, "ordered_list_close": -1}
# Rendered as nothing: a command followed by one reads as the command alone.
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))


def _visible(text: str) -> str:
    """`text` as a reader sees it: invisible characters gone, any space a space."""
    return "".join(" " if unicodedata.category(char) == "Zs" else char
                   for char in text.translate(_INVISIBLE))


def _rendered_lines(inline: Token) -> list[str]:
    """A paragraph's lines as text; a code span, HTML or an image stays marked (NUL) so
    that a line starting with one never reads as a command."""
    parts: list[str] = []
    for child in inline.children or []:
        if child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "text":
            parts.append(child.content)
        elif child.type == "code_inline":
            parts.append(f"\0{child.markup}{child.content}{child.markup}")
        elif child.type in ("html_inline", "image"):
            parts.append("\0")
        else:  # emphasis and link markup: the reader sees the text between
            parts.append(child.markup if child.type.endswith(("_open", "_close"))
                         and child.type.startswith(("em", "strong", "s_")) else "")
    return "".join(parts).split("\n")


_HIDDEN_OPEN = re.compile(r"^ {0,3}(>>>|\$\$)\s*$")  # GitLab's multi-line quote; math
_FOOTNOTE = re.compile(r"^ {0,3}\[\^[^\]]+\]:")
_DETAILS = re.compile(r"<(/?)details\b", re.IGNORECASE)


def _unseen_blocks(body: str) -> str:
    """What CommonMark does not know but the forges render out of a comment's lines: a
    GitLab `>>>` quote, a `$$` math block, a footnote (moved to the bottom with its lazy
    lines). Their lines become NUL, which never reads as a command."""
    lines = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    closing: str | None = None
    in_footnote = False
    for index, line in enumerate(lines):
        if closing is not None:
            if _HIDDEN_OPEN.match(line) and line.strip() == closing:
                closing = None
            lines[index] = "\0"
        elif (opened := _HIDDEN_OPEN.match(line)) is not None:
            closing = opened.group(1)
            lines[index] = "\0"
        elif _FOOTNOTE.match(line) or (in_footnote and line.strip()):
            in_footnote = True
            lines[index] = "\0"
        else:
            in_footnote = False
    return "\n".join(lines)


def _details_depth(html: str, depth: int) -> int:
    for found in _DETAILS.finditer(html):
        depth = max(0, depth + (-1 if found.group(1) else 1))
    return depth


def command_lines(body: str) -> list[tuple[str, str]]:
    """(name, arguments) of each paragraph line, outside quotes, lists and collapsed
    `<details>`, that starts with a slash command."""
    found: list[tuple[str, str]] = []
    nested = details = 0
    tokens = _MARKDOWN.parse(_unseen_blocks(body))
    for index, token in enumerate(tokens):
        nested += _NESTING.get(token.type, 0)
        if token.type == "html_block":
            details = _details_depth(token.content, details)
        if token.type != "inline":
            continue
        paragraph = index > 0 and tokens[index - 1].type == "paragraph_open"
        lines: list[str] = []
        for child in token.children or []:
            if child.type == "html_inline":
                details = _details_depth(child.content, details)
        if paragraph and not nested:
            lines = _rendered_lines(token)
        for line in lines:
            match = _COMMAND_LINE.match(_visible(line).strip())
            if match and not details:
                found.append((match.group("name").lower(),
                              (match.group("args") or "").replace("\0", "").strip()))
    return found


@dataclass
class _Flags:
    backend: str | None = None
    hint: str | None = None
    force: bool = False
    errors: list[str] = field(default_factory=list)


_FLAGS = ("--backend", "--hint", "--force")


def _unknown(word: str) -> str:
    close = difflib.get_close_matches(word, _FLAGS, n=1)
    suggestion = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown argument {quoted(word)}{suggestion}"


def _take_value(words: list[str], index: int, flag: str, flags: _Flags) -> tuple[str | None, int]:
    if index + 1 >= len(words) or words[index + 1].startswith("--"):
        flags.errors.append(f"{flag} needs a value")
        return None, index + 1
    return words[index + 1], index + 2


def _parse_flags(words: list[str]) -> _Flags:
    flags = _Flags()
    index = 0
    while index < len(words):
        word = words[index]
        name, _, inline = word.partition("=")
        if name == "--force" and not inline:
            flags.force = True
            index += 1
        elif name in ("--backend", "--hint"):
            value: str | None = inline or None
            if value is None:
                value, index = _take_value(words, index, name, flags)
            else:
                index += 1
            if name == "--backend" and flags.backend is not None:
                flags.errors.append("--backend is given twice: name several backends once, "
                                    "comma-separated")
            elif name == "--backend":
                flags.backend = value
            else:
                flags.hint = value
        else:
            flags.errors.append(_unknown(word))
            # An unknown flag's value is not a second mistake worth reporting.
            takes_value = word.startswith("--") and "=" not in word
            has_value = index + 1 < len(words) and not words[index + 1].startswith("--")
            index += 2 if takes_value and has_value else 1
    if flags.backend is not None:
        try:
            flags.backend = ",".join(parse_backends(flags.backend))
        except BadInputError:
            flags.errors.append(f"--backend must be one of {', '.join(backend_names())} (or "
                                f"several, comma-separated), not {quoted(flags.backend)}")
    if flags.hint is not None and len(flags.hint) > MAX_HINT_CHARS:
        flags.errors.append(f"--hint is longer than {MAX_HINT_CHARS} characters")
    return flags


def parse_regen(arguments: str) -> RegenCommand:
    """The /regen command's flags; a malformed one carries `problem` (with the usage)."""
    try:
        words = shlex.split(arguments)
    except ValueError as exc:
        return RegenCommand(problem=f"cannot read the arguments ({exc}). Usage: "
                            f"{REGEN_HELP.usage}")
    flags = _parse_flags(words)
    if flags.errors:
        return RegenCommand(problem="; ".join(flags.errors) + f". Usage: {REGEN_HELP.usage}")
    return RegenCommand(backend=flags.backend, hint=flags.hint, force=flags.force)


HELP_HELP = CommandHelp(
    name="help", usage="/help", description="list the commands opbot understands.",
    who="anyone who may comment here", examples=("/help",))

CANCEL_HELP = CommandHelp(
    name="cancel", usage="/cancel",
    description="stop opbot's queued and running work on this operator (the bot's branch and "
    "pull request stay as they are).",
    who="people with write permission on the repository", examples=("/cancel",))

# Every command opbot reads, with its help; bot/jobs.py pairs each with its handler (and a
# test checks that no command lacks one), so /help can never list what does not exist.
COMMANDS: dict[str, CommandHelp] = {help.name: help
                                    for help in (REGEN_HELP, CANCEL_HELP, HELP_HELP)}


@dataclass(frozen=True)
class FoundCommand:
    name: str
    regen: RegenCommand | None = None  # /regen's flags


def find_command(body: str) -> FoundCommand | None:
    """The first command of a comment that opbot knows (others' commands are not ours)."""
    for name, arguments in command_lines(body):
        if name == REGEN_HELP.name:
            return FoundCommand(name, parse_regen(arguments))
        if name in COMMANDS:
            return FoundCommand(name)
    return None


def find_regen(body: str) -> RegenCommand | None:
    """The first /regen command of a comment, or None."""
    for name, arguments in command_lines(body):
        if name == REGEN_HELP.name:
            return parse_regen(arguments)
    return None
