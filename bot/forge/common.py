"""Small helpers both forges share: credentials in a push URL, and keeping tokens out of text."""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit


def with_credentials(url: str, user: str, token: str | None) -> str:
    """`url` with `user:token@` for http(s); file:// and local paths need no credentials."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not token or parts.hostname is None:
        return url
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(token, safe='')}@{host}"))


def scrub(text: str, token: str | None) -> str:
    """`text` with the token replaced: error messages may echo a URL or a header."""
    return text.replace(token, "***") if token else text
