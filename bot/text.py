"""People's text made safe to quote: no hidden characters, no way out of a code fence."""

from __future__ import annotations

import re

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# Zero-width and bidirectional controls hide text from reviewers (Trojan Source).
_HIDDEN = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u00ad]")


def clean_text(text: str) -> str:
    """People's text without HTML comments and hidden or bidirectional characters."""
    return _HIDDEN.sub("", _HTML_COMMENT.sub("", text)).replace("\r\n", "\n")


def fence_free(text: str) -> str:
    """Text that cannot close the code fence it is quoted in."""
    return text.replace("```", "'''").replace("~~~", "'''")


_MARKDOWN_ACTIVE = re.compile(r"([\\`*_\[\]()!<>@#|~])")


def quoted(text: str, limit: int = 80) -> str:
    """A person's word echoed back in a comment: cut short, quoted, and with every
    Markdown-active character escaped (no image, link, mention or code fence)."""
    cut = text if len(text) <= limit else f"{text[:limit]}..."
    return "'" + _MARKDOWN_ACTIVE.sub(r"\\\1", cut.replace("\n", " ")) + "'"
