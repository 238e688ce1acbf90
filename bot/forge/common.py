"""Small helpers both forges share: git credentials kept out of URLs, and tokens kept out
of text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import quote, urlsplit, urlunsplit

# The environment variables the credential helper below reads.
GIT_USERNAME_VARIABLE = "OPBOT_GIT_USERNAME"
GIT_PASSWORD_VARIABLE = "OPBOT_GIT_PASSWORD"  # noqa: S105 - a variable's name, no secret
# Answers git's `get` with the two variables (nothing for `store`/`erase`); the values
# never reach a command line, a URL or .git/config.
_HELPER = (f'!f() {{ test "$1" = get || exit 0; '
           f'printf "username=%s\\npassword=%s\\n" '
           f'"${GIT_USERNAME_VARIABLE}" "${GIT_PASSWORD_VARIABLE}"; }}; f')


def git_credential_env(username: str, password: str) -> dict[str, str]:
    """Environment variables that make `git` (2.31+) authenticate over HTTP(S) with
    `username`/`password` (`Forge.git_credentials()`): any configured helpers are reset,
    then one helper reads the credentials from this environment. Merge the result into
    the environment of the git commands that clone, fetch or push."""
    return {"GIT_CONFIG_COUNT": "2",
            "GIT_CONFIG_KEY_0": "credential.helper", "GIT_CONFIG_VALUE_0": "",
            "GIT_CONFIG_KEY_1": "credential.helper", "GIT_CONFIG_VALUE_1": _HELPER,
            GIT_USERNAME_VARIABLE: username, GIT_PASSWORD_VARIABLE: password}


def without_credentials(url: str) -> str:
    """`url` with any `user:password@` removed (a URL the forge reported as it is)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def with_credentials(url: str, user: str, token: str | None) -> str:
    """`url` with `user:token@` for http(s); file:// and local paths need no credentials.

    Kept only for callers not yet moved to `git_credential_env`: a URL with a token in
    it leaks into logs, error messages and .git/config."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not token or parts.hostname is None:
        return url
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(token, safe='')}@{host}"))


def scrub(text: str, token: str | None) -> str:
    """`text` with the token replaced: error messages may echo a URL or a header."""
    return text.replace(token, "***") if token else text


def first_set(environ: Mapping[str, str], variables: Iterable[str]) -> str | None:
    """The value of the first of `variables` set (non-empty) in `environ`."""
    return next((value for name in variables if (value := environ.get(name))), None)
