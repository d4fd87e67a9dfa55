"""Verifying push requests (Standard Webhooks): a receiver checks that a request comes from
its delayq, was not altered, and is recent.

The signature is ``v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`` keyed
by the secret's bytes (``whsec_<base64>``); several space-separated signatures mean the sender
holds several secrets (rotation): one match is enough.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Union

DEFAULT_TOLERANCE_S = 300


class WebhookVerificationError(Exception):
    """The request is not a valid, recent, signed delayq push."""


def _key(secret: str) -> bytes:
    if not secret.startswith("whsec_"):
        raise ValueError("a secret looks like whsec_<base64>")
    try:
        return base64.b64decode(secret[len("whsec_"):], validate=True)
    except ValueError as e:
        raise ValueError(f"the secret is not base64: {e}") from None


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value for one secret (what the pusher sends)."""
    mac = hmac.new(_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


@dataclass(frozen=True)
class WebhookMessage:
    """A push request whose signature checked out."""

    #: Its ``webhook-id``: the job id, the same on every retry — deduplicate on it.
    id: str
    #: When it was signed (``webhook-timestamp``, seconds since the epoch).
    timestamp: int
    #: The body parsed as JSON, or the raw bytes when it is not JSON.
    payload: Any


def verify_webhook(
    secret: Union[str, Iterable[str]],
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    now: Optional[float] = None,
) -> WebhookMessage:
    """Checks a push request; returns the verified :class:`WebhookMessage` (id, timestamp,
    payload). Raises :class:`WebhookVerificationError` otherwise.

    ``secret``: one ``whsec_…`` or several (during a rotation). ``headers``: any mapping
    (names case-insensitive). ``body``: the raw bytes, before any JSON parsing.
    """
    h = {k.lower(): v for k, v in headers.items()}
    msg_id = h.get("webhook-id")
    ts = h.get("webhook-timestamp")
    sigs = h.get("webhook-signature")
    if not msg_id or not ts or not sigs:
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        ts_i = int(ts)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not a number") from None
    now = time.time() if now is None else now
    if abs(now - ts_i) > tolerance_s:
        raise WebhookVerificationError("webhook-timestamp is too old or in the future")
    secrets = [secret] if isinstance(secret, str) else list(secret)
    wanted = [sign(s, msg_id, ts_i, bytes(body)) for s in secrets]
    for given in sigs.split():
        if any(hmac.compare_digest(given, w) for w in wanted):
            try:
                payload: Any = json.loads(bytes(body))
            except ValueError:
                payload = bytes(body)
            return WebhookMessage(id=msg_id, timestamp=ts_i, payload=payload)
    raise WebhookVerificationError("no signature matches")
