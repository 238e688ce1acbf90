"""GitLab webhooks: the secret token GitLab sends back in a header, and the delivery's
headers."""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence

TOKEN_HEADER = "x-gitlab-token"  # noqa: S105 - a header name, not a secret
EVENT_HEADER = "x-gitlab-event"
# GitLab names a delivery twice: Idempotency-Key (newer) and X-Gitlab-Event-UUID.
DELIVERY_HEADERS = ("idempotency-key", "x-gitlab-event-uuid")
REJECTION = "missing or wrong token"


def token_ok(header: str | None, secrets: Sequence[str]) -> bool:
    """Whether `header` is one of `secrets` (several during a rotation), in constant time."""
    if not header:
        return False
    return any(hmac.compare_digest(header.encode(), secret.encode()) for secret in secrets)


def authenticate(headers: Mapping[str, str], body: bytes, secrets: Sequence[str]) -> bool:
    return token_ok(headers.get(TOKEN_HEADER), secrets)


def event_name(headers: Mapping[str, str]) -> str | None:
    return headers.get(EVENT_HEADER)


def delivery_id(headers: Mapping[str, str]) -> str | None:
    return next((found for name in DELIVERY_HEADERS if (found := headers.get(name))), None)
