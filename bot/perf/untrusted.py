"""Text from outside opbot (a worker's device name, a case name, a refusal reason) made
safe for one markdown table cell or one line of PERF.md and the pull request body.

bot.text's `clean_text` drops HTML comments and hidden characters; on top of that the
text is put on one line (a newline would end the table row or open a fence), cut short
(the worker's `device` has no length cap), every markdown-active character is escaped
(no HTML, image, link, code span or `|` column) and mentions are broken, so an answer
cannot ping people, hide the rest of the body behind `<!--` or break out of a table."""

from __future__ import annotations

import re

from bot.text import clean_text

MAX_CELL = 120
# Escaped: what can open HTML or a comment (<, &), a code span or fence (`, ~), a link or
# image ([ ]), a table column (|), emphasis (*), a heading or issue link (#). Underscores,
# parentheses and ! stay: without [ they do nothing, and do_bench stays readable.
_ACTIVE = re.compile(r"([\\`*\[\]<>#|~&])")
_SPACES = re.compile(r"\s+")


def md_cell(text: object, limit: int = MAX_CELL) -> str:
    """`text` on one line, at most `limit` characters (and an ellipsis), markdown-inert."""
    flat = _SPACES.sub(" ", clean_text(str(text))).strip()
    cut = flat if len(flat) <= limit else f"{flat[:limit]}..."
    # A fullwidth at sign reads the same but GitHub does not take it for a mention.
    return _ACTIVE.sub(r"\\\1", cut).replace("@", "\uff20")
