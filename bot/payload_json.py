"""A webhook payload read as JSON, once, for `opbot event` and `opbot serve` alike.

What json.loads lets through but breaks later is refused here with a reason: nesting too
deep to walk (json.loads itself stops near Python's recursion limit, with RecursionError),
an integer too long to convert (ValueError), and text that is not Unicode (a lone surrogate
such as "\\ud800", which no output can encode).
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.errors import BadInputError

MAX_DEPTH = 512  # arrays and objects inside each other; real deliveries nest about 10 deep
_SURROGATE = re.compile("[\ud800-\udfff]")


class PayloadError(BadInputError):
    """A payload that cannot be used. `reason` completes "the payload is ..."; `line` is
    where the JSON breaks, when known."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        self.reason = reason
        self.line = line
        super().__init__(reason)


def load_payload(data: bytes | str) -> Any:
    """`data` parsed, or PayloadError: not JSON (or not UTF-8), nested deeper than
    MAX_DEPTH, or holding a lone surrogate in a key or a string."""
    try:
        payload = json.loads(data)
    except json.JSONDecodeError as exc:
        raise PayloadError(f"not JSON ({exc.msg})", line=exc.lineno) from None
    except UnicodeDecodeError:
        raise PayloadError("not UTF-8 text") from None
    except RecursionError:
        raise PayloadError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # an integer of more digits than int() converts (4300)
        raise PayloadError("not JSON (a number too long to read)") from None
    _check(payload)
    return payload


def _check(payload: Any) -> None:
    """Walk the payload without recursion: depth and text."""
    stack: list[tuple[Any, int]] = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            _check_text(value)
            continue
        if isinstance(value, dict):
            items: list[Any] = list(value.values())
            for key in value:
                _check_text(key)
        elif isinstance(value, list):
            items = value
        else:
            continue
        if depth > MAX_DEPTH:
            raise PayloadError(f"nested deeper than {MAX_DEPTH} levels")
        stack.extend((item, depth + 1) for item in items)


def _check_text(text: str) -> None:
    if _SURROGATE.search(text):
        raise PayloadError("not valid Unicode text (it holds a lone surrogate, such as "
                           "\\ud800)")
