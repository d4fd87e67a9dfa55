"""asyncio: ``AsyncClient`` makes the calls of the v1 API (``AsyncOps``, the source the
synchronous client's calls are generated from) over httpx; ``AsyncWorker`` runs ``async``
handlers on the event loop with the same rules as ``Worker``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import uuid
from typing import Any, Awaitable, Callable, Dict, Optional, Sequence, Set, Tuple, Union

from . import errors
from ._bodies import request_headers
from ._ops import AsyncOps
from .models import MAX_RESULT_BYTES, ClaimedJob, result_size
from .worker import CANCEL_CHECK, Dead, failure_of

try:  # httpx is the extra "async" (pip install "delayq[async]"); the sync client needs nothing.
    import httpx
except ImportError:  # pragma: no cover - depends on the environment
    httpx = None  # type: ignore[assignment]

log = logging.getLogger("delayq.aio")


class AsyncClient(AsyncOps):
    """The asyncio client: every method of :class:`Client`, awaited, over httpx's connection
    pool (``pip install "delayq[async]"``)::

        async with delayq.AsyncClient("http://127.0.0.1:7070") as client:
            await client.enqueue("orders", {"order": 42}, delay_ms=30 * 60 * 1000)

    ``retries`` attempts more are made on connection errors and 503 ``unavailable``, after
    ``backoff`` seconds, doubling; ``http`` is an ``httpx.AsyncClient`` of your own (proxies,
    TLS settings), closed by :meth:`aclose` as well.
    """

    def __init__(self, base_url: str, token: Optional[str] = None, *, timeout: float = 30.0,
                 retries: int = 3, backoff: float = 0.2,
                 http: Optional["httpx.AsyncClient"] = None):
        if httpx is None:
            raise ImportError('AsyncClient needs httpx: pip install "delayq[async]"')
        super().__init__(base_url, token, timeout, retries, backoff)
        self._http = http or httpx.AsyncClient(
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the client's connections."""
        await self._http.aclose()

    async def _pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def _send(self, method: str, path: str, data: Optional[bytes],
                    timeout: float) -> Tuple[int, bytes, Optional[int]]:
        assert httpx is not None
        try:
            resp = await self._http.request(method, self.base_url + path, content=data,
                                            headers=request_headers(self.token, data),
                                            timeout=timeout)
        except httpx.TransportError as e:
            raise errors.ConnectionFailed(f"{method} {path}: {e}") from e
        after = resp.headers.get("retry-after", "").strip()
        return resp.status_code, resp.content, int(after) if after.isdigit() else None


class AsyncWorker:
    """Runs ``await handler(job)`` for each due job, ``concurrency`` at once, extending leases
    while they run; stops on SIGTERM/SIGINT or ``stop()``. What the handler returns (other than
    ``None``) is the job's result, as with :class:`Worker`; ``queue`` may be a list of queues —
    names or ``(name, weight)`` — served together by weight, or in order with ``strict=True``."""

    def __init__(self, client: AsyncClient, queue: Union[str, Sequence[Union[str, Tuple[str, int]]]],
                 handler: Callable[[ClaimedJob], Awaitable[Any]], *, concurrency: int = 10,
                 lease_ms: int = 30_000, wait_ms: int = 5_000, shutdown_grace: float = 30.0,
                 strict: bool = False, cancel_grace: float = 10.0):
        self.queues = [queue] if isinstance(queue, str) else list(queue)
        if not self.queues:
            raise ValueError("a worker serves at least one queue")
        first = self.queues[0]
        self.strict = strict
        self.client, self.queue, self.handler = client, first if isinstance(first, str) else first[0], handler
        self.concurrency, self.lease_ms, self.wait_ms = concurrency, lease_ms, wait_ms
        self.shutdown_grace = shutdown_grace
        # How long a handler whose job was cancelled while it ran has to stop once cancelled.
        self.cancel_grace = cancel_grace
        # The running handlers' tasks and jobs, by (queue, id, lease_token): asked about every
        # half second.
        self._running: Dict[Tuple[str, str, int], Tuple["asyncio.Future[Any]", ClaimedJob]] = {}
        self._stop = asyncio.Event()
        # The long poll in flight, cut short by stop() so a SIGTERM does not wait it out.
        self._poll: Optional[str] = None
        self._cuts: Set[Any] = set()
        self.acked = 0
        self.failed = 0

    def stop(self) -> None:
        """Asks the worker to stop; a long poll in flight is cut short."""
        self._stop.set()
        if self._poll is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        t = loop.create_task(self._cut(self._poll))
        self._cuts.add(t)
        t.add_done_callback(self._cuts.discard)

    async def _cut(self, poll: str) -> None:
        try:
            await self.client.cut_poll(self.queue, poll)
        except errors.DelayqError as e:
            log.debug("cutting the long poll short failed: %s", e)

    async def run(self, *, install_signal_handlers: bool = True, idle_exit: Optional[float] = None) -> None:
        """Works until stopped (or idle for ``idle_exit`` seconds)."""
        loop = asyncio.get_running_loop()
        if install_signal_handlers:
            for s in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(s, self.stop)
        slots = asyncio.Semaphore(self.concurrency)
        tasks: Set[Any] = set()
        watch = asyncio.create_task(self._watch_cancels())
        last = loop.time()
        while not self._stop.is_set():
            await slots.acquire()
            free = 1
            while free < self.concurrency and not slots.locked():
                await slots.acquire()
                free += 1
            self._poll = uuid.uuid4().hex
            wait_ms = 0 if self._stop.is_set() else self.wait_ms
            try:
                if len(self.queues) == 1:
                    jobs = await self.client.claim(self.queue, max=free, lease_ms=self.lease_ms,
                                                   wait_ms=wait_ms, poll_id=self._poll)
                else:
                    jobs = await self.client.claim_many(self.queues, max=free,
                                                        lease_ms=self.lease_ms, wait_ms=wait_ms,
                                                        strict=self.strict, poll_id=self._poll)
            except (errors.ConnectionFailed, errors.Unavailable) as e:
                log.warning("claim failed: %s", e)
                jobs = []
                await asyncio.sleep(1.0)
            finally:
                self._poll = None
            for _ in range(free - len(jobs)):
                slots.release()
            for job in jobs:
                t = asyncio.create_task(self._run_one(job, slots))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
            if jobs:
                last = loop.time()
            elif idle_exit is not None and loop.time() - last > idle_exit:
                break
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.shutdown_grace)
            for t in pending:
                t.cancel()
        watch.cancel()

    async def _watch_cancels(self) -> None:
        """Every half second while jobs run: asks which were cancelled (``cancel(...,
        running=True)``) and cancels their handlers (``job.cancelled`` is set first)."""
        while True:
            await asyncio.sleep(CANCEL_CHECK)
            asked = [k for k, (_, job) in self._running.items() if not job.cancelled.is_set()]
            asked = asked[:1000]
            if not asked:
                continue
            try:
                found = await self.client.cancelled_leases(asked)
            except (errors.DelayqError, errors.ConnectionFailed) as e:
                log.debug("asking for cancelled leases failed: %s", e)
                continue
            for k in found:
                self._cancel_task(k)

    def _cancel_task(self, key: Tuple[str, str, int]) -> None:
        """The job was cancelled while it ran: ``job.cancelled`` is set, its handler cancelled."""
        running = self._running.get(key)
        if running is None:
            return
        handler, job = running
        if not job.cancelled.is_set() and not handler.done():
            log.info("job %s: cancelled while it runs; its handler is cancelled", job.id)
            job.cancelled.set()
            handler.cancel()

    async def _run_one(self, job: ClaimedJob, slots: asyncio.Semaphore) -> None:
        try:
            await self._run_handler(job)
        finally:
            slots.release()

    async def _run_handler(self, job: ClaimedJob) -> None:
        key = (job.queue, job.id, job.lease_token)
        extender = asyncio.create_task(self._extend(job))
        handler = asyncio.ensure_future(self.handler(job))
        self._running[key] = (handler, job)
        try:
            result = await asyncio.shield(handler)
            size = result_size(result)
            if size > MAX_RESULT_BYTES:
                raise Dead(f"result of {size} bytes is over the limit of {MAX_RESULT_BYTES} bytes")
        except asyncio.CancelledError:
            if job.cancelled.is_set():
                # Cancelled while it ran: its store ended it (nothing to ack or nack); the
                # handler was cancelled and gets its grace to unwind.
                await asyncio.wait([handler], timeout=self.cancel_grace)
                return
            # The worker's own task was cancelled (shutdown past its grace).
            handler.cancel()
            await self.client.release(job.queue, job.id, job.lease_token, undo_attempt=False)
            raise
        except Exception as e:  # noqa: BLE001 - every failure is the job's
            failure: Optional[Exception] = e
        else:
            failure = None
        finally:
            self._running.pop(key, None)
            extender.cancel()
        if job.cancelled.is_set():
            return  # cancelled while it ran: its store ended it, nothing to ack or nack
        if failure is not None:
            self.failed += 1
            try:
                await self.client.nack(job.queue, job.id, job.lease_token, **failure_of(failure))
            except errors.LeaseLost:
                log.warning("job %s: lease lost before the nack", job.id)
            return
        try:
            await self.client.ack(job.queue, job.id, job.lease_token, result=result)
            self.acked += 1
        except (errors.LeaseLost, errors.NotFound):
            log.warning("job %s: lease lost before the ack", job.id)

    async def _extend(self, job: ClaimedJob) -> None:
        while True:
            await asyncio.sleep(max(self.lease_ms / 3000, 0.01))
            try:
                await self.client.extend(job.queue, job.id, job.lease_token, self.lease_ms)
            except errors.Cancelled:
                self._cancel_task((job.queue, job.id, job.lease_token))
                return
            except errors.LeaseLost:
                return
            except (errors.DelayqError, errors.ConnectionFailed) as e:
                log.warning("job %s: lease extension failed: %s", job.id, e)
