"""GitHub webhooks: the HMAC-SHA256 signature over the raw body, and the delivery's headers."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence

SIGNATURE_HEADER = "x-hub-signature-256"
EVENT_HEADER = "x-github-event"
DELIVERY_HEADER = "x-github-delivery"
REJECTION = "missing or wrong signature"


def signature_ok(body: bytes, header: str | None, secrets: Sequence[str]) -> bool:
    """Whether `header` signs `body` with one of `secrets` (several during a rotation)."""
    if not header or not header.startswith("sha256="):
        return False
    for secret in secrets:
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if hmac.compare_digest(expected.encode(), header.encode()):
            return True
    return False


def authenticate(headers: Mapping[str, str], body: bytes, secrets: Sequence[str]) -> bool:
    return signature_ok(body, headers.get(SIGNATURE_HEADER), secrets)


def event_name(headers: Mapping[str, str]) -> str | None:
    return headers.get(EVENT_HEADER)


def delivery_id(headers: Mapping[str, str]) -> str | None:
    return headers.get(DELIVERY_HEADER)
