"""What the API answers, as small typed objects."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union, cast

from . import _wire


MAX_RESULT_BYTES = 65_535
"""The largest result a job keeps, in bytes (its JSON text, or the bytes)."""


def result_of(d: _wire.JobView) -> Any:
    """A done job's result: the JSON value, ``bytes`` when it is not JSON, ``None`` when it
    has none."""
    b64 = d.get("result_b64")
    if b64 is not None:
        return base64.b64decode(b64)
    return d.get("result")


def dependencies_of(deps: Optional[List[_wire.DepView]]) -> Optional[List[Dict[str, Any]]]:
    """A job's dependencies as plain dicts (``result``: JSON value or ``bytes``); ``None``
    when it has none."""
    if not deps:
        return None
    return [{"queue": x["queue"], "id": x["id"], "state": x["state"],
             "result": result_of(cast(_wire.JobView, x))} for x in deps]


def result_size(result: Any) -> int:
    """The size of ``result`` as an ack sends it (0 for none)."""
    if result is None:
        return 0
    if isinstance(result, (bytes, bytearray)):
        return len(result)
    return len(json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode())


def payload_of(d: Union[_wire.JobView, _wire.ClaimedJob]) -> Any:
    """A job's payload: the JSON value, or ``bytes`` when it was stored as bytes."""
    b64 = d.get("payload_b64")
    if b64 is not None:
        return base64.b64decode(b64)
    return d.get("payload")


@dataclass(frozen=True)
class Enqueued:
    """The answer to an enqueue."""

    id: str
    due_at: int
    """Due time, ms since the epoch (server clock); for an existing id, that job's."""
    created: bool
    """``False`` when the id existed and nothing was written."""
    replaced: bool = False
    state: Optional[str] = None
    """With ``on_conflict="replace"``: the state of an existing job that refused it."""

    @classmethod
    def from_json(cls, d: _wire.EnqueueResponse) -> "Enqueued":
        return cls(d["id"], d["due_at"], d["created"], d.get("replaced", False), d.get("state"))


@dataclass(frozen=True)
class Job:
    """A job as ``get`` and the listings return it."""

    id: str
    state: str
    attempt: int
    max_attempts: int
    due_at: int
    created_at: int
    payload: Any
    priority: int = 5
    lease_deadline: Optional[int] = None
    failed_at: Optional[int] = None
    completed_at: Optional[int] = None
    last_error: Optional[str] = None
    timeout_ms: Optional[int] = None
    expires_at: Optional[int] = None
    target: Optional[_wire.TargetView] = None
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None
    result: Any = None
    """A done job's result as its handler returned it (JSON value, or ``bytes``)."""
    key: Optional[str] = None
    """Its key (a tenant, a customer, an upstream host), if it carries one."""
    dependencies: Optional[List[Dict[str, Any]]] = None
    """A job enqueued with ``depends_on``: each dependency, ``{"queue", "id", "state"}``."""

    @classmethod
    def from_json(cls, d: _wire.JobView) -> "Job":
        return cls(
            id=d["id"], state=d["state"], attempt=d["attempt"], max_attempts=d["max_attempts"],
            due_at=d["due_at"], created_at=d["created_at"], payload=payload_of(d),
            priority=d.get("priority", 5), lease_deadline=d.get("lease_deadline"),
            failed_at=d.get("failed_at"), completed_at=d.get("completed_at"),
            last_error=d.get("last_error"), timeout_ms=d.get("timeout_ms"),
            expires_at=d.get("expires_at"), target=d.get("target"),
            traceparent=d.get("traceparent"), tracestate=d.get("tracestate"),
            result=result_of(d), key=d.get("key"),
            dependencies=dependencies_of(d.get("dependencies")),
        )


@dataclass(frozen=True)
class ClaimedJob:
    """A job leased by ``claim``: give ``lease_token`` back with ack, nack and extend."""

    queue: str
    id: str
    lease_token: int
    attempt: int
    max_attempts: int
    due_at: int
    created_at: int
    lease_deadline: int
    payload: Any
    priority: int = 5
    last_error: Optional[str] = None
    timeout_ms: Optional[int] = None
    expires_at: Optional[int] = None
    traceparent: Optional[str] = None
    """The W3C trace context the job was enqueued with: continue its trace from it."""
    tracestate: Optional[str] = None
    key: Optional[str] = None
    """Its key, if it carries one."""
    dependencies: Optional[List[Dict[str, Any]]] = None
    """Enqueued with ``include_dependency_results``: each dependency, ``{"queue", "id",
    "state", "result"}``."""
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False,
                                       repr=False)
    """Set when the job is cancelled while it runs (``cancel(..., running=True)``): a handler
    of the thread :class:`Worker` should stop (check it between steps, or ``wait`` on it); the
    job is neither acked nor retried. (An :class:`AsyncWorker`'s handler is cancelled.)"""

    @classmethod
    def from_json(cls, queue: str, d: _wire.ClaimedJob) -> "ClaimedJob":
        return cls(
            queue=queue, id=d["id"], lease_token=d["lease_token"], attempt=d["attempt"],
            max_attempts=d["max_attempts"], due_at=d["due_at"], created_at=d["created_at"],
            lease_deadline=d["lease_deadline"], payload=payload_of(d),
            priority=d.get("priority", 5), last_error=d.get("last_error"),
            timeout_ms=d.get("timeout_ms"), expires_at=d.get("expires_at"),
            traceparent=d.get("traceparent"), tracestate=d.get("tracestate"),
            key=d.get("key"), dependencies=dependencies_of(d.get("dependencies")),
        )

    def json(self) -> Any:
        """The payload parsed as JSON (it already is, unless it was stored as bytes)."""
        return json.loads(self.payload) if isinstance(self.payload, bytes) else self.payload


@dataclass(frozen=True)
class QueueStats:
    """Counts of one queue (and its settings, from ``stats``/``configure``)."""

    queue: str
    scheduled: int
    due: int
    due_next_minute: int
    leased: int
    dead: int
    oldest_overdue_ms: int
    paused: bool = False
    waiting_on_limit: int = 0
    done: int = 0
    settings: Optional[_wire.SettingsView] = None

    @classmethod
    def from_json(cls, d: _wire.QueueView) -> "QueueStats":
        return cls(
            queue=d["queue"], scheduled=d["scheduled"], due=d["due"],
            due_next_minute=d["due_next_minute"], leased=d["leased"], dead=d["dead"],
            oldest_overdue_ms=d["oldest_overdue_ms"], paused=d.get("paused", False),
            waiting_on_limit=d.get("waiting_on_limit", 0), done=d.get("done", 0),
            settings=d.get("settings"),
        )


@dataclass(frozen=True)
class JobPage:
    """One page of a listing; pass ``next_cursor`` back for the next (``None``: the end)."""

    jobs: List[Job] = field(default_factory=list)
    next_cursor: Optional[str] = None


@dataclass(frozen=True)
class KeyStats:
    """One key of a queue (``Client.keys``): its jobs in flight and due, and its hold."""

    key: str
    in_flight: int
    due: int
    paused_until: Optional[int] = None
    """When its hold ends (ms since the epoch); ``None``: not held."""

    @classmethod
    def from_json(cls, d: _wire.KeyView) -> "KeyStats":
        return cls(d["key"], d["in_flight"], d["due"], d.get("paused_until"))


@dataclass(frozen=True)
class Batch:
    """A batch (``Client.create_batch``) and how its jobs stand: ``state`` is ``open`` (jobs
    may join), ``closed`` (waiting for its jobs), ``done`` (its callbacks enqueued) or
    ``callback_failed`` (its jobs ended but its callbacks could not be enqueued:
    ``callback_error`` says why; tried again with a backoff)."""

    id: str
    queue: str
    state: str
    total: int
    pending: int
    succeeded: int
    dead: int
    cancelled: int
    created_at: int
    """When it was created (ms since the epoch)."""
    done_at: Optional[int] = None
    """When it was done (ms since the epoch); ``None`` while it is not."""
    callback_error: Optional[str] = None
    """Why its callbacks could not be enqueued (state ``callback_failed``)."""
    callback_attempts: Optional[int] = None
    """Failed tries of its callbacks."""
    callback_next_try_at: Optional[int] = None
    """Their next try (ms since the epoch)."""

    @classmethod
    def from_json(cls, d: _wire.BatchView) -> "Batch":
        return cls(d["id"], d["queue"], d["state"], d["total"], d["pending"], d["succeeded"],
                   d["dead"], d["cancelled"], d["created_at_ms"], d.get("done_at_ms"),
                   d.get("callback_error"), d.get("callback_attempts"),
                   d.get("callback_next_try_at_ms"))
