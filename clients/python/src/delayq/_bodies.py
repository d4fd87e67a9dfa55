"""What both clients send: job bodies (the client gives each job its id before the first try,
so a retried enqueue never stores two jobs), acks with their results, times, and the trace
headers of the active OpenTelemetry context."""

from __future__ import annotations

import base64
import datetime as _dt
import json
import uuid
from typing import Any, Dict, Literal, Optional, TypeVar, Union, cast

from . import _wire, errors

#: What a cancel found (every client answers the same five; "cancelling" only with running=True).
CancelOutcome = Literal["cancelled", "cancelling", "not_found", "leased", "dead"]

try:  # OpenTelemetry is optional: with it, enqueues carry the application's active trace.
    from opentelemetry import propagate as _otel_propagate  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - depends on the environment
    _otel_propagate = None

API_VERSION = "v1"

Time = Union[int, float, str, _dt.datetime]
"""ms since the epoch, RFC 3339 text, or an aware ``datetime``."""

# The enqueue fields besides the payload and the id, as the generated wire types name them.
_ENQUEUE_FIELDS = frozenset(
    _wire.EnqueueRequest.__required_keys__ | _wire.EnqueueRequest.__optional_keys__
) - {"payload", "payload_b64", "id"}


def request_body(body: Any) -> Optional[bytes]:
    """A request's JSON body (``None``: no body)."""
    return None if body is None else json.dumps(body, separators=(",", ":")).encode()


def request_headers(token: Optional[str], data: Optional[bytes]) -> Dict[str, str]:
    """A request's headers: JSON, the bearer token, the active trace context."""
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = "Bearer " + token
    headers.update(trace_headers())
    return headers


def error_of(status: int, raw: bytes, retry_after: Optional[int]) -> errors.DelayqError:
    """The typed error of an answer that is not a 2xx."""
    try:
        answer = json.loads(raw) if raw else {}
    except ValueError:
        answer = {"code": "unknown", "message": raw[:200].decode(errors="replace")}
    return errors.from_answer(status, answer if isinstance(answer, dict) else {}, retry_after)


def trace_headers() -> Dict[str, str]:
    """The active OpenTelemetry context as W3C headers (``traceparent``, ``tracestate``), or
    nothing when OpenTelemetry is not installed or no trace is active."""
    if _otel_propagate is None:
        return {}
    carrier: Dict[str, str] = {}
    try:
        _otel_propagate.inject(carrier)
    except Exception:  # tracing must never fail a call
        return {}
    return {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")}


def _time(v: Time) -> Union[int, str]:
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            raise ValueError("give an aware datetime (with tzinfo): a naive one is ambiguous")
        return int(v.timestamp() * 1000)
    if isinstance(v, float):
        return int(v)
    return v


def _fnv1a64(text: str) -> int:
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def new_id(key: Optional[str] = None) -> str:
    """A fresh job id (what the client gives an enqueue without one). For a job with a
    ``key`` it ends with ``~k`` and the key's hash, so a sharded Redis store keeps every job of
    the key in the key's shard, as the server's own ids do."""
    if key:
        return f"{uuid.uuid4().hex}~k{_fnv1a64(key):016x}"
    return uuid.uuid4().hex


def job_body(payload: Any = None, **fields: Any) -> _wire.EnqueueRequest:
    """The JSON body of one job: ``payload`` (bytes go as base64) and the given fields."""
    body: Dict[str, Any] = {}
    if isinstance(payload, (bytes, bytearray, memoryview)):
        body["payload_b64"] = base64.b64encode(bytes(payload)).decode()
    else:
        body["payload"] = payload
    unknown = set(fields) - set(_ENQUEUE_FIELDS) - {"id"}
    if unknown:
        raise TypeError(f"unknown job fields: {', '.join(sorted(unknown))}")
    for k, v in fields.items():
        if v is None:
            continue
        body[k] = _time(v) if k in ("run_at", "expires_at") else v
    body["id"] = fields.get("id") or new_id(fields.get("key"))
    return cast(_wire.EnqueueRequest, body)


_Acked = TypeVar("_Acked", _wire.ClaimAck, _wire.QueueAck, _wire.AckRequest)


def _with_result(ack: _Acked, result: Any = None) -> _Acked:
    """``ack`` with its result: ``bytes`` as ``result_b64``, anything else JSON (``None``: no
    result)."""
    if isinstance(result, (bytes, bytearray)):
        ack["result_b64"] = base64.b64encode(bytes(result)).decode()
    elif result is not None:
        ack["result"] = result
    return ack


def _ack(id: str, lease_token: int, result: Any = None) -> _wire.ClaimAck:
    """One ack of a claim or an ack batch, with its result when it has one."""
    return _with_result(_wire.ClaimAck(id=id, lease_token=lease_token), result)
