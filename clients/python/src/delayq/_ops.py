"""The calls of the v1 API, written once for both clients: ``AsyncOps`` here is the source, and
``_sync_ops.py`` (``SyncOps``, what :class:`delayq.Client` runs) is generated from this file by
``cargo run -p delayq-codegen`` with ``async`` and ``await`` taken out; a test fails while the
two differ. The retries live here too (``_call``); each client brings only its transport:
``_send`` (one request) and ``_pause`` (the wait between tries).
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import (Any, AsyncIterator, Dict, Iterable, List, Mapping, Optional, Tuple, Union,
                    cast)

from . import _wire, errors
from ._bodies import (API_VERSION, CancelOutcome, Time, _ack, _time, _with_result, error_of,
                      job_body, request_body)
from .models import Batch, ClaimedJob, Enqueued, Job, JobPage, KeyStats, QueueStats


class AsyncOps:
    """Every call of the v1 API over a transport's ``_send``.

    ``retries`` attempts more are made on connection errors and 503 ``unavailable``, after
    ``backoff`` seconds, doubling (or the answer's ``Retry-After``).
    """

    def __init__(self, base_url: str, token: Optional[str], timeout: float, retries: int,
                 backoff: float):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        """Seconds one request may take (a long poll's wait comes on top)."""
        self.retries = retries
        self.backoff = backoff

    async def _send(self, method: str, path: str, data: Optional[bytes],
                    timeout: float) -> Tuple[int, bytes, Optional[int]]:
        """The transport's: one request — the answer's status, body and ``Retry-After``
        (seconds, when given); ``errors.ConnectionFailed`` when no answer came."""
        raise NotImplementedError

    async def _pause(self, seconds: float) -> None:
        """The transport's: the wait before the next try."""
        raise NotImplementedError

    async def _call(self, method: str, path: str, body: Any = None, *,
                    timeout: Optional[float] = None, repeat: bool = True) -> Any:
        """One call: the answer's JSON, or a typed error; tried again when ``repeat`` allows
        and no answer came or the server was unavailable."""
        data = request_body(body)
        delay = self.backoff
        for attempt in range(self.retries + 1):
            again = repeat and attempt < self.retries
            try:
                status, raw, retry_after = await self._send(method, path, data,
                                                            timeout or self.timeout)
            except errors.ConnectionFailed:
                if not again:
                    raise
                await self._pause(delay)
                delay *= 2
                continue
            if 200 <= status < 300:
                return json.loads(raw) if raw else None
            err = error_of(status, raw, retry_after)
            if not (again and isinstance(err, errors.Unavailable)):
                raise err
            await self._pause(retry_after if retry_after is not None else delay)
            delay *= 2
        raise AssertionError("unreachable")

    @staticmethod
    def _q(queue: str, rest: str = "") -> str:
        return f"/{API_VERSION}/queues/{urllib.parse.quote(queue, safe='')}{rest}"

    def _job(self, queue: str, id: str, rest: str = "") -> str:
        return self._q(queue, f"/jobs/{urllib.parse.quote(id, safe='')}{rest}")

    # ----- producing -----

    async def enqueue(
        self,
        queue: str,
        payload: Any = None,
        *,
        id: Optional[str] = None,
        delay_ms: Optional[float] = None,
        run_at: Optional[Time] = None,
        max_attempts: Optional[int] = None,
        backoff: Optional[Dict[str, Any]] = None,
        lease_ms: Optional[int] = None,
        timeout_ms: Optional[int] = None,
        expires_at: Optional[Time] = None,
        expire_after_ms: Optional[int] = None,
        priority: Optional[int] = None,
        key: Optional[str] = None,
        keep_done_ms: Optional[int] = None,
        dedupe_ms: Optional[int] = None,
        on_conflict: Optional[str] = None,
        target: Optional[Dict[str, Any]] = None,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
        depends_on: Optional[List[Any]] = None,
        on_dependency_failure: Optional[str] = None,
        include_dependency_results: Optional[bool] = None,
    ) -> Enqueued:
        """Enqueues one job (payload: any JSON value, or ``bytes``). Without ``id`` the
        client makes one before the first try, so a retried enqueue never stores two jobs.
        ``target`` (``{"url", "method"?, "headers"?}``) has it pushed by HTTP at the due time.
        ``key`` (a tenant, a customer, an upstream host) shares the queue's claims among keys
        and puts the job under the queue's per-key limits.
        The job carries the active OpenTelemetry trace when OpenTelemetry is installed, or the
        W3C ``traceparent`` / ``tracestate`` given here.
        ``depends_on`` (ids of the same queue, or ``{"queue", "id"}``) makes it wait: its state
        is ``waiting`` until each has ended, then it is due at the later of its own due time
        and that end; ``on_dependency_failure`` (``"dead"``, ``"cancel"``, ``"run"``) says what
        a dead or cancelled one does, ``include_dependency_results`` puts their results in its
        claim.
        """
        body = job_body(
            payload, id=id, delay_ms=delay_ms, run_at=run_at, max_attempts=max_attempts,
            backoff=backoff, lease_ms=lease_ms, timeout_ms=timeout_ms, expires_at=expires_at,
            expire_after_ms=expire_after_ms, priority=priority, key=key, keep_done_ms=keep_done_ms,
            dedupe_ms=dedupe_ms, on_conflict=on_conflict, target=target,
            traceparent=traceparent, tracestate=tracestate, depends_on=depends_on,
            on_dependency_failure=on_dependency_failure,
            include_dependency_results=include_dependency_results,
        )
        return Enqueued.from_json(await self._call("POST", self._q(queue, "/jobs"), body))

    async def create_flow(self, jobs: Iterable[Mapping[str, Any]]) -> List[Dict[str, Any]]:
        """Enqueues a flow: jobs of any queues that wait for one another, each
        ``{"queue", "id", "payload", "depends_on"?, **enqueue fields}``. Checked whole — a
        cycle, a dependency neither in the flow nor stored, or a bad job raises
        ``InvalidInput`` (code ``invalid_flow``) and nothing is written — then written
        dependencies first. Returns each job's ``{"queue", "id", "created", "due_at", ...}``,
        in order."""
        bodies = []
        for j in jobs:
            rest = {k: v for k, v in j.items() if k not in ("payload", "queue")}
            body = dict(job_body(j.get("payload"), **rest))
            body["queue"] = j["queue"]
            bodies.append(body)
        answer: _wire.FlowResponse = await self._call("POST", "/v1/flows", {"jobs": bodies})
        return [dict(v) for v in answer["jobs"]]

    async def enqueue_many(self, queue: str, jobs: Iterable[Mapping[str, Any]]) -> List[Enqueued]:
        """Enqueues a batch atomically: each item is ``{"payload": ..., **enqueue fields}``."""
        bodies = [job_body(j.get("payload"), **{k: v for k, v in j.items() if k != "payload"})
                  for j in jobs]
        answer = await self._call("POST", self._q(queue, "/jobs"), bodies)
        return [Enqueued.from_json(e) for e in answer]

    # ----- batches -----

    async def create_batch(self, queue: str, jobs: Iterable[Mapping[str, Any]], *,
                     id: Optional[str] = None, on_complete: Optional[Mapping[str, Any]] = None,
                     on_success: Optional[Mapping[str, Any]] = None, open: bool = False,
                     include_results: bool = False) -> Batch:
        """Creates a batch of ``jobs`` (items as for ``enqueue_many``): when every one has ended
        (acked, dead or cancelled) its callbacks are enqueued once — ``on_complete`` as
        ``batch-<id>-complete``, ``on_success`` (none dead) as ``batch-<id>-success``, each
        ``{"queue": ..., "payload": {...}, "delay_ms": ...}``, the payload extended with
        ``batch: {id, total, succeeded, dead, cancelled}``. Closed at once unless ``open``; an
        open batch of that id gains the jobs instead (``Conflict`` once it is closed)."""
        body: _wire.BatchRequest = {
            "jobs": [job_body(j.get("payload"), **{k: v for k, v in j.items() if k != "payload"})
                     for j in jobs],
            "open": open,
            "include_results": include_results,
        }
        if id is not None:
            body["id"] = id
        if on_complete is not None:
            body["on_complete"] = cast(_wire.CallbackBody, dict(on_complete))
        if on_success is not None:
            body["on_success"] = cast(_wire.CallbackBody, dict(on_success))
        # Sent once: a retry after an answer lost to a create that closed its batch would be
        # refused (the batch exists, closed).
        answer = await self._call("POST", self._q(queue, "/batches"), body, repeat=False)
        return Batch.from_json(answer["batch"])

    async def add_to_batch(self, queue: str, id: str, jobs: Iterable[Mapping[str, Any]], *,
                     close: bool = False) -> Batch:
        """Adds ``jobs`` to an open batch (``Conflict`` once it is closed), then closes it
        with ``close``."""
        body: _wire.BatchJobsRequest = {
            "jobs": [job_body(j.get("payload"), **{k: v for k, v in j.items() if k != "payload"})
                     for j in jobs],
            "close": close,
        }
        path = self._q(queue, "/batches/" + urllib.parse.quote(id, safe="") + "/jobs")
        added: _wire.BatchAddedView = await self._call("POST", path, body, repeat=False)
        return Batch.from_json(added["batch"])

    async def close_batch(self, queue: str, id: str) -> Batch:
        """Closes a batch: no job joins it any more."""
        path = self._q(queue, "/batches/" + urllib.parse.quote(id, safe="") + "/close")
        return Batch.from_json(await self._call("POST", path))

    async def batch(self, queue: str, id: str) -> Batch:
        """One batch: its state and counts (``NotFound`` when there is none)."""
        path = self._q(queue, "/batches/" + urllib.parse.quote(id, safe=""))
        return Batch.from_json(await self._call("GET", path))

    async def batches(self, queue: str, *, limit: int = 20) -> List[Batch]:
        """The batches of a queue not done yet, oldest first."""
        answer = await self._call("GET", self._q(queue, f"/batches?limit={limit}"))
        return [Batch.from_json(b) for b in answer["batches"]]

    async def get(self, queue: str, id: str) -> Job:
        """One job in any state; ``NotFound`` when it is gone (done, cancelled)."""
        return Job.from_json(await self._call("GET", self._job(queue, id)))

    async def cancel(self, queue: str, id: str, *, running: bool = False) -> CancelOutcome:
        """Removes a scheduled job; returns what it found, as every client does:
        ``"cancelled"``, ``"not_found"`` (done and gone, or never there), ``"leased"`` (a
        consumer holds it now) or ``"dead"``. With ``running=True`` a job a worker runs is
        cancelled too: ``"cancelling"`` — it is ended cancelled now and its worker stops the
        handler within a second (``job.cancelled`` is set; an AsyncWorker cancels its handler).
        Other failures raise."""
        try:
            path = self._job(queue, id) + ("?running=true" if running else "")
            out: _wire.Outcome = await self._call("DELETE", path)
            return "cancelling" if out["outcome"] == "cancelling" else "cancelled"
        except errors.NotFound:
            return "not_found"
        except errors.JobLeased:
            return "leased"
        except errors.JobDead:
            return "dead"

    async def reschedule(self, queue: str, id: str, *, delay_ms: Optional[float] = None,
                   run_at: Optional[Time] = None) -> int:
        """Moves a scheduled job; returns its new due time (ms)."""
        body: _wire.RescheduleRequest = {}
        if delay_ms is not None:
            body["delay_ms"] = delay_ms
        if run_at is not None:
            body["run_at"] = _time(run_at)
        out: _wire.Outcome = await self._call("PATCH", self._job(queue, id), body)
        return cast(int, out["due_at"])

    async def run_now(self, queue: str, id: str) -> int:
        """Makes a scheduled job due now; returns its due time."""
        out: _wire.Outcome = await self._call("POST", self._job(queue, id, "/run"))
        return cast(int, out["due_at"])

    # ----- consuming -----

    async def claim(self, queue: str, *, max: int = 1, lease_ms: Optional[int] = None,
              wait_ms: int = 0, poll_id: Optional[str] = None,
              acks: Iterable[Tuple[str, int]] = ()) -> List[ClaimedJob]:
        """Leases up to ``max`` due jobs, waiting up to ``wait_ms`` for one (a long poll).
        ``poll_id`` (1-64 of ``[A-Za-z0-9._-]``) names the poll so :meth:`cut_poll` can end it.
        ``acks`` (``[(id, lease_token)]`` or ``(id, lease_token, result)``, at most 1,000) are
        acknowledged first, in the same request (an ack whose lease moved on is skipped)."""
        body: _wire.ClaimRequest = {"max": max, "wait_ms": wait_ms}
        sent = [_ack(*a) for a in acks]
        if sent:
            body["acks"] = sent
        if lease_ms is not None:
            body["lease_ms"] = lease_ms
        if poll_id is not None:
            body["poll_id"] = poll_id
        answer: _wire.ClaimResponse = await self._call("POST", self._q(queue, "/claim"), body,
                                                 timeout=self.timeout + wait_ms / 1000)
        return [ClaimedJob.from_json(queue, j) for j in answer["jobs"]]

    async def claim_many(self, queues: Iterable[Union[str, Tuple[str, int]]], *, max: int = 1,
                   lease_ms: Optional[int] = None, wait_ms: int = 0, strict: bool = False,
                   poll_id: Optional[str] = None,
                   acks: Iterable[Tuple[str, str, int]] = ()) -> List[ClaimedJob]:
        """Leases up to ``max`` due jobs from several queues (``POST /v1/claim``): ``queues``
        are names or ``(name, weight)``; among those with due jobs the claim goes by weight, or
        in the order given with ``strict``; with ``wait_ms`` one long poll waits on all of
        them (``poll_id`` names it: :meth:`cut_poll` on the first queue ends it). ``acks``
        (``[(queue, id, lease_token)]`` or ``(queue, id, lease_token, result)``) are
        acknowledged first. Each job names its queue."""
        qs: List[_wire.QueueClaim] = []
        for q in queues:
            name, weight = (q, None) if isinstance(q, str) else q
            qs.append({"name": name} if weight is None else {"name": name, "weight": weight})
        body: _wire.ClaimManyRequest = {"queues": qs, "max": max, "wait_ms": wait_ms}
        if strict:
            body["strict"] = True
        sent = [_with_result(_wire.QueueAck(queue=a[0], id=a[1], lease_token=a[2]), *a[3:])
                for a in acks]
        if sent:
            body["acks"] = sent
        if lease_ms is not None:
            body["lease_ms"] = lease_ms
        if poll_id is not None:
            body["poll_id"] = poll_id
        answer: _wire.ClaimResponse = await self._call("POST", "/v1/claim", body,
                                                 timeout=self.timeout + wait_ms / 1000)
        return [ClaimedJob.from_json(j.get("queue") or "", j) for j in answer["jobs"]]

    async def cut_poll(self, queue: str, poll_id: str) -> None:
        """Ends the long poll named ``poll_id`` now: it answers with what it holds (usually no
        job). A cut that arrives before its poll ends that poll as soon as it comes."""
        await self._call("DELETE", self._q(queue, "/polls/" + urllib.parse.quote(poll_id, safe="")))

    async def ack(self, queue: str, id: str, lease_token: int, *, result: Any = None) -> None:
        """Completes a job (``LeaseLost`` when the lease moved on). ``result`` (any JSON
        value, or ``bytes``; at most 65,535 bytes) is kept with the job while its queue keeps
        done jobs (``keep_done_ms``); :meth:`get` answers it as ``Job.result``."""
        await self._call("POST", self._job(queue, id, "/ack"),
                   _with_result(_wire.AckRequest(lease_token=lease_token), result))

    async def cancelled_leases(self, leases: Iterable[Tuple[str, str, int]]) -> List[Tuple[str, str, int]]:
        """Which of ``leases`` — ``(queue, id, lease_token)`` — were cancelled while their jobs
        ran (``cancel(..., running=True)``): a worker asks about the jobs it runs and stops
        their handlers."""
        body: _wire.CancelledRequest = {
            "leases": [{"queue": q, "id": i, "lease_token": t} for q, i, t in leases]}
        out: _wire.CancelledResponse = await self._call("POST", "/v1/leases/cancelled", body)
        return [(l["queue"], l["id"], l["lease_token"]) for l in out["cancelled"]]

    async def ack_many(self, queue: str, acks: Iterable[Tuple[Any, ...]]) -> List[str]:
        """Completes up to 1,000 jobs in one request, ``[(id, lease_token), ...]`` (or
        ``(id, lease_token, result)``); answers per job, in order, ``"acked"``,
        ``"lease_lost"`` or ``"not_found"`` (a request retried after a lost answer reports the
        jobs it had acked as ``"not_found"``)."""
        body: _wire.AckBatchRequest = {"acks": [_ack(*a) for a in acks]}
        out: _wire.AckBatchResponse = await self._call("POST", self._q(queue, "/acks"), body)
        return list(out["acks"])

    async def nack(self, queue: str, id: str, lease_token: int, *, error: Optional[str] = None,
             retry_in_ms: Optional[int] = None, dead: bool = False) -> Dict[str, Any]:
        """Fails an attempt: retried by backoff (or after ``retry_in_ms``), or dead."""
        body: _wire.NackRequest = {"lease_token": lease_token, "dead": dead}
        if error is not None:
            body["error"] = error
        if retry_in_ms is not None:
            body["retry_in_ms"] = retry_in_ms
        return cast(Dict[str, Any], await self._call("POST", self._job(queue, id, "/nack"), body))

    async def extend(self, queue: str, id: str, lease_token: int, lease_ms: Optional[int] = None) -> int:
        """Extends a lease; returns the new deadline (ms)."""
        body: _wire.ExtendRequest = {"lease_token": lease_token}
        if lease_ms is not None:
            body["lease_ms"] = lease_ms
        out: _wire.Outcome = await self._call("POST", self._job(queue, id, "/extend"), body)
        return cast(int, out["lease_deadline"])

    async def release(self, queue: str, id: str, lease_token: int, *, undo_attempt: bool = True) -> None:
        """Gives a lease back: the job is due again at once."""
        body: _wire.ReleaseRequest = {"lease_token": lease_token, "undo_attempt": undo_attempt}
        await self._call("POST", self._job(queue, id, "/release"), body)

    # ----- the token -----

    async def whoami(self) -> Dict[str, Any]:
        """What this client's token may do: ``{"scope", "allows", "tokens_required"}`` —
        ``scope`` is ``read``, ``produce``, ``consume``, ``admin`` or ``all`` (a bare token, or
        a server without tokens); ``allows`` lists every scope whose calls it may make."""
        return cast(Dict[str, Any], await self._call("GET", f"/{API_VERSION}/whoami"))

    # ----- queues -----

    async def queues(self) -> List[QueueStats]:
        """Every queue's counts."""
        return [QueueStats.from_json(q) for q in await self._call("GET", f"/{API_VERSION}/queues")]

    async def stats(self, queue: str) -> QueueStats:
        """One queue's counts and settings."""
        return QueueStats.from_json(await self._call("GET", self._q(queue)))

    async def configure(self, queue: str, **settings: Any) -> QueueStats:
        """Changes settings: ``shards``, ``lane`` (the one-delay lane, Redis),
        ``lane_window_ms`` (the width of its time windows, 0: none), ``rate``
        (``{"per_s", "burst"}`` or ``None``),
        ``max_in_flight``, ``keep_done_ms``, ``dedupe_ms``, ``target`` (or ``None``),
        ``delivery`` (``"pull"``: workers claim the jobs; ``"push"``: ``delayq serve --push``
        sends each to its target), ``key_max_in_flight`` and ``key_rate`` (each key's limits,
        or ``None``), ``pause_key_on_429``, ``cold_after_ms`` (jobs due further ahead wait in
        PostgreSQL beside the store: ``delayq serve --postgres``; ``None`` moves them back)."""
        return QueueStats.from_json(await self._call("PUT", self._q(queue), settings))

    async def pause(self, queue: str) -> None:
        """Stops leasing from the queue (enqueues still accepted)."""
        await self._call("POST", self._q(queue, "/pause"))

    async def resume(self, queue: str) -> None:
        """Resumes a paused queue."""
        await self._call("POST", self._q(queue, "/resume"))

    async def pause_key(self, queue: str, key: str, *, for_ms: Optional[int] = None,
                  until: Optional[Time] = None) -> Optional[int]:
        """Holds one key's due jobs until ``until`` or for ``for_ms`` (an upstream's
        ``Retry-After``): the queue's other keys are claimed meanwhile. Returns when the hold
        ends (ms), ``None`` when it is already over."""
        body: _wire.KeyPauseRequest = {}
        if for_ms is not None:
            body["for_ms"] = for_ms
        if until is not None:
            body["until"] = _time(until)
        path = self._q(queue, "/keys/" + urllib.parse.quote(key, safe="") + "/pause")
        hold: _wire.KeyHoldView = await self._call("POST", path, body)
        return hold.get("paused_until")

    async def resume_key(self, queue: str, key: str) -> None:
        """Lifts a key's hold: its due jobs are claimed again at once."""
        await self._call("POST", self._q(queue, "/keys/" + urllib.parse.quote(key, safe="") + "/resume"))

    async def keys(self, queue: str, *, limit: int = 20) -> List[KeyStats]:
        """The busiest keys of a queue: most jobs in flight and due first, then held ones."""
        answer: _wire.KeyList = await self._call("GET", self._q(queue, f"/keys?limit={limit}"))
        return [KeyStats.from_json(k) for k in answer["keys"]]

    async def key_jobs(self, queue: str, key: str, state: Optional[str] = None, *,
                 limit: int = 100, cursor: Optional[str] = None) -> JobPage:
        """One page of a key's jobs, by id: scheduled, due, running (``leased``) and dead
        ones, or only those in ``state``. Costs the key's jobs, not the queue's."""
        qs = {"limit": str(limit)}
        if state:
            qs["state"] = state
        if cursor:
            qs["cursor"] = cursor
        path = self._q(queue, "/keys/" + urllib.parse.quote(key, safe="") + "/jobs?"
                       + urllib.parse.urlencode(qs))
        a: _wire.JobList = await self._call("GET", path)
        return JobPage([Job.from_json(j) for j in a["jobs"]], a.get("next_cursor"))

    async def iter_key_jobs(self, queue: str, key: str, state: Optional[str] = None, *,
                      page_size: int = 100) -> AsyncIterator[Job]:
        """Every job of a key (in ``state``, when given), page after page."""
        cursor: Optional[str] = None
        while True:
            page = await self.key_jobs(queue, key, state, limit=page_size, cursor=cursor)
            for job in page.jobs:
                yield job
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def cancel_key(self, queue: str, key: str, *, running: bool = False) -> Dict[str, int]:
        """Cancels every scheduled and due job of a key ("user 42 deleted their account") —
        with ``running=True`` its running jobs too, their workers told to stop them. Returns
        ``{"cancelled": n, "running": m}`` (``m`` of the ``n`` were running)."""
        body: _wire.KeyCancelRequest = {"running": running}
        path = self._q(queue, "/keys/" + urllib.parse.quote(key, safe="") + "/cancel")
        out: _wire.KeyCancelView = await self._call("POST", path, body)
        return {"cancelled": out["cancelled"], "running": out["running"]}

    async def reschedule_key(self, queue: str, key: str, *, shift_ms: Optional[int] = None,
                       due_at: Optional[Time] = None) -> int:
        """Moves every scheduled and due job of a key: each by ``shift_ms`` from its own due
        time (negative: earlier, never before now), or all to ``due_at``. Returns how many
        moved. A shift is sent once (a repeat would move them again)."""
        body: _wire.KeyRescheduleRequest = {}
        if shift_ms is not None:
            body["shift_ms"] = shift_ms
        if due_at is not None:
            body["due_at"] = _time(due_at)
        path = self._q(queue, "/keys/" + urllib.parse.quote(key, safe="") + "/reschedule")
        out: _wire.KeyRescheduleView = await self._call("POST", path, body,
                                                        repeat=shift_ms is None)
        return out["rescheduled"]

    async def list_jobs(self, queue: str, state: str = "scheduled", *, limit: int = 100,
                  cursor: Optional[str] = None) -> JobPage:
        """One page of jobs in ``state`` (scheduled, due, leased, dead, done)."""
        qs = {"state": state, "limit": str(limit)}
        if cursor:
            qs["cursor"] = cursor
        a: _wire.JobList = await self._call("GET", self._q(queue, "/jobs?" + urllib.parse.urlencode(qs)))
        return JobPage([Job.from_json(j) for j in a["jobs"]], a.get("next_cursor"))

    async def iter_jobs(self, queue: str, state: str = "scheduled", *,
                  page_size: int = 100) -> AsyncIterator[Job]:
        """Every job in ``state``, page after page (``page_size`` per request)."""
        cursor: Optional[str] = None
        while True:
            page = await self.list_jobs(queue, state, limit=page_size, cursor=cursor)
            for job in page.jobs:
                yield job
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def deliveries(self, queue: str, id: str) -> List[Dict[str, Any]]:
        """The push requests the server sent for a job (its pusher's recent window)."""
        answer: _wire.Deliveries = await self._call("GET", self._job(queue, id, "/deliveries"))
        return cast(List[Dict[str, Any]], answer["deliveries"])

    # ----- dead letters -----

    async def dead(self, queue: str, *, offset: int = 0, limit: int = 100) -> List[Job]:
        """Dead jobs, oldest failure first."""
        a = await self._call("GET", self._q(queue, f"/dead?offset={offset}&limit={limit}"))
        return [Job.from_json(j) for j in (a["jobs"] if isinstance(a, dict) else a)]

    async def requeue(self, queue: str, id: str) -> None:
        """Moves one dead job back to scheduled, due now."""
        await self._call("POST", self._q(queue, f"/dead/{urllib.parse.quote(id, safe='')}/requeue"))

    async def requeue_all(self, queue: str) -> int:
        """Requeues every dead job; returns how many."""
        out: _wire.Outcome = await self._call("POST", self._q(queue, "/dead/requeue"))
        return out.get("count") or 0

    async def delete_dead(self, queue: str, id: str) -> None:
        """Deletes one dead job."""
        await self._call("DELETE", self._q(queue, f"/dead/{urllib.parse.quote(id, safe='')}"))

    async def purge_dead(self, queue: str) -> int:
        """Deletes every dead job; returns how many."""
        out: _wire.Outcome = await self._call("DELETE", self._q(queue, "/dead"))
        return out.get("count") or 0

    # ----- schedules -----

    async def put_schedule(self, queue: str, name: str, payload: Any = None, *,
                     cron: Optional[str] = None, tz: Optional[str] = None,
                     every_ms: Optional[int] = None, **fields: Any) -> Dict[str, Any]:
        """Stores a periodic schedule (``cron`` + ``tz``, or ``every_ms``); other fields:
        ``catch_up``, ``max_attempts``, ``backoff``, ``lease_ms``, ``timeout_ms``."""
        given = dict(cron=cron, tz=tz, every_ms=every_ms, **fields)
        unknown = set(given) - (_wire.ScheduleBody.__required_keys__
                                | _wire.ScheduleBody.__optional_keys__)
        if unknown:
            raise TypeError(f"unknown schedule fields: {', '.join(sorted(unknown))}")
        body = cast(_wire.ScheduleBody, {k: v for k, v in given.items() if v is not None})
        if isinstance(payload, (bytes, bytearray, memoryview)):
            body["payload_b64"] = base64.b64encode(bytes(payload)).decode()
        else:
            body["payload"] = payload
        return cast(Dict[str, Any], await self._call("PUT", self._q(queue, f"/schedules/{urllib.parse.quote(name, safe='')}"), body))

    async def schedule(self, queue: str, name: str) -> Dict[str, Any]:
        """One schedule, with its ``next_fire``."""
        return cast(Dict[str, Any], await self._call("GET", self._q(queue, f"/schedules/{urllib.parse.quote(name, safe='')}")))

    async def schedules(self, queue: str) -> List[Dict[str, Any]]:
        """The queue's schedules by name."""
        answer: _wire.ScheduleList = await self._call("GET", self._q(queue, "/schedules"))
        return cast(List[Dict[str, Any]], answer["schedules"])

    async def delete_schedule(self, queue: str, name: str) -> None:
        """Deletes a schedule (jobs it enqueued stay)."""
        await self._call("DELETE", self._q(queue, f"/schedules/{urllib.parse.quote(name, safe='')}"))
