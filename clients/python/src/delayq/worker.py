"""A worker: long-polls a queue, runs a function per job on a thread pool with a concurrency
limit, extends each lease while its function runs, acks or nacks, and stops gracefully on
SIGTERM / SIGINT (no new claims; running jobs get ``shutdown_grace`` seconds, then their
leases are released so another worker takes them at once).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import errors
from .client import Client
from .models import MAX_RESULT_BYTES, ClaimedJob, result_size

log = logging.getLogger("delayq.worker")

#: How often a worker that runs jobs asks which of them were cancelled, seconds.
CANCEL_CHECK = 0.5


class Retry(Exception):
    """Raise from a handler to retry after ``delay_ms`` instead of the job's backoff."""

    def __init__(self, message: str = "retry", delay_ms: Optional[int] = None):
        super().__init__(message)
        self.delay_ms = delay_ms


class Dead(Exception):
    """Raise from a handler to dead-letter the job at once."""


def failure_of(e: BaseException) -> Dict[str, Any]:
    """The nack fields of a handler's exception."""
    msg = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    out: Dict[str, Any] = {"error": msg[:1000]}
    if isinstance(e, Retry) and e.delay_ms is not None:
        out["retry_in_ms"] = e.delay_ms
    if isinstance(e, Dead):
        out["dead"] = True
    return out


class Worker:
    """Runs ``handler(job)`` for each due job of ``queue``; returning acks (a value other
    than ``None`` is the job's result: JSON, or ``bytes``; at most 65,535 bytes, more
    dead-letters the job), raising nacks.

    ``queue`` may also be a list of queues — names or ``(name, weight)`` — served together:
    among those with due jobs the claims go by weight, or in the order given with
    ``strict=True`` (``POST /v1/claim``, one long poll over all of them)."""

    def __init__(
        self,
        client: Client,
        queue: Union[str, Sequence[Union[str, Tuple[str, int]]]],
        handler: Callable[[ClaimedJob], Any],
        *,
        concurrency: int = 1,
        lease_ms: int = 30_000,
        wait_ms: int = 5_000,
        shutdown_grace: float = 30.0,
        strict: bool = False,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self.queues = [queue] if isinstance(queue, str) else list(queue)
        if not self.queues:
            raise ValueError("a worker serves at least one queue")
        first = self.queues[0]
        self.queue = first if isinstance(first, str) else first[0]
        self.strict = strict
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.wait_ms = wait_ms
        self.shutdown_grace = shutdown_grace
        self._stop = threading.Event()
        # The long poll in flight, cut short by stop() so a SIGTERM does not wait it out.
        self._poll: Optional[str] = None
        self._slots = threading.Semaphore(concurrency)
        self._running: Dict[Tuple[str, int], "_Running"] = {}
        self._lock = threading.Lock()
        # Finished jobs' acks, sent with the next claim — or at once while a claim waits.
        self._acks: List[Any] = []
        self.acked = 0
        self.failed = 0

    def stop(self) -> None:
        """Asks the worker to stop (what SIGTERM does); a long poll in flight is cut short."""
        self._stop.set()
        poll = self._poll
        if poll is not None:
            threading.Thread(target=self._cut, args=(poll,), daemon=True).start()

    def _cut(self, poll: str) -> None:
        try:
            self.client.cut_poll(self.queue, poll)
        except errors.DelayqError as e:
            log.debug("cutting the long poll short failed: %s", e)

    def run(self, *, install_signal_handlers: bool = True, idle_exit: Optional[float] = None) -> None:
        """Works until ``stop()``, SIGTERM or SIGINT — or, with ``idle_exit``, until no job
        came for that many seconds."""
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for s in (signal.SIGTERM, signal.SIGINT):
                signal.signal(s, lambda *_: self.stop())
        last_job = time.monotonic()
        ended = threading.Event()
        keeper = threading.Thread(target=self._keep, args=(ended,), daemon=True)
        keeper.start()
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="delayq") as pool:
            while not self._stop.is_set():
                if not self._slots.acquire(timeout=0.2):
                    continue
                free = 1
                while free < self.concurrency and self._slots.acquire(blocking=False):
                    free += 1
                self._poll = uuid.uuid4().hex
                # Read after naming the poll: a stop() before this sees no poll to cut.
                wait_ms = 0 if self._stop.is_set() else self.wait_ms
                acks = self._take_acks()
                self._flush_acks()  # any that came in since: the claim may wait
                try:
                    if len(self.queues) == 1:
                        jobs = self.client.claim(self.queue, max=free, lease_ms=self.lease_ms,
                                                 wait_ms=wait_ms, poll_id=self._poll,
                                                 acks=[a[1:] for a in acks])
                    else:
                        jobs = self.client.claim_many(self.queues, max=free,
                                                      lease_ms=self.lease_ms, wait_ms=wait_ms,
                                                      strict=self.strict, poll_id=self._poll,
                                                      acks=acks)
                except (errors.ConnectionFailed, errors.Unavailable) as e:
                    log.warning("claim failed: %s", e)
                    with self._lock:
                        self._acks[:0] = acks
                    jobs = []
                    self._stop.wait(1.0)
                finally:
                    self._poll = None
                for _ in range(free - len(jobs)):
                    self._slots.release()
                for job in jobs:
                    self._running_state(job)
                    pool.submit(self._run_one, job)
                if jobs:
                    last_job = time.monotonic()
                elif idle_exit is not None and time.monotonic() - last_job > idle_exit:
                    break
            self._drain()
        ended.set()
        keeper.join()
        self._flush_acks(force=True)

    def _take_acks(self) -> List[Any]:
        with self._lock:
            acks, self._acks = self._acks[:1000], self._acks[1000:]
        return acks

    def _flush_acks(self, force: bool = False) -> None:
        """Sends pending acks now when a claim is waiting on the server (they would otherwise
        wait for the next claim, past the leases of their jobs), or when ``force``d."""
        if self._poll is None and not force:
            return
        acks = self._take_acks()
        if not acks:
            return
        try:
            for q in dict.fromkeys(a[0] for a in acks):
                self.client.ack_many(q, [a[1:] for a in acks if a[0] == q])
        except (errors.DelayqError, errors.ConnectionFailed) as e:
            log.warning("acks failed: %s", e)
            with self._lock:
                self._acks[:0] = acks

    def _drain(self) -> None:
        deadline = time.monotonic() + self.shutdown_grace
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running:
                    return
            time.sleep(0.05)
        with self._lock:
            left = [st.job for st in self._running.values()]
        for job in left:
            try:
                self.client.release(job.queue, job.id, job.lease_token, undo_attempt=False)
            except errors.DelayqError as e:
                log.warning("release of %s failed: %s", job.id, e)

    def _run_one(self, job: ClaimedJob) -> None:
        st = self._running_state(job)
        try:
            try:
                result = self.handler(job)
                size = result_size(result)
                if size > MAX_RESULT_BYTES:
                    # The work is done: running it again is the operator's call (the server
                    # would refuse the ack, and the acks riding with it).
                    raise Dead(f"result of {size} bytes is over the limit of "
                                     f"{MAX_RESULT_BYTES} bytes")
            except Exception as e:  # noqa: BLE001 - every failure is the job's
                if not st.finish():
                    return  # already given up as "timeout"
                self.failed += 1
                try:
                    self.client.nack(job.queue, job.id, job.lease_token, **failure_of(e))
                except errors.LeaseLost:
                    log.warning("job %s: lease lost before the nack", job.id)
            else:
                if not st.finish():
                    return  # already given up as "timeout"
                with self._lock:
                    self._acks.append((job.queue, job.id, job.lease_token, result))
                self.acked += 1
                self._flush_acks()
        finally:
            with self._lock:
                self._running.pop((job.id, job.lease_token), None)
            self._slots.release()

    def _running_state(self, job: ClaimedJob) -> "_Running":
        with self._lock:
            st = self._running.get((job.id, job.lease_token))
            if st is None:
                st = self._running[(job.id, job.lease_token)] = _Running(job, self.lease_ms)
        return st

    def _keep(self, until: threading.Event) -> None:
        """One thread for every running job: extends each lease every third of ``lease_ms``,
        and past a job's ``timeout_ms`` gives the attempt up as ``timeout`` (the handler's
        thread cannot be stopped: its result is ignored)."""
        tick = min(max(self.lease_ms / 3000, 0.01), 0.05)
        next_check = time.monotonic() + CANCEL_CHECK
        while not until.wait(tick):
            now = time.monotonic()
            with self._lock:
                states = list(self._running.values())
            if now >= next_check:
                next_check = now + CANCEL_CHECK
                self._check_cancelled([st for st in states if not st.done])
            for st in states:
                if st.deadline is not None and now >= st.deadline:
                    if st.give_up():
                        self.failed += 1
                        try:
                            self.client.nack(st.job.queue, st.job.id, st.job.lease_token, error="timeout")
                        except (errors.DelayqError, errors.ConnectionFailed) as e:
                            log.warning("job %s: the timeout's nack failed: %s", st.job.id, e)
                    continue
                if now >= st.next_extend and not st.done:
                    st.next_extend = now + st.period
                    try:
                        self.client.extend(st.job.queue, st.job.id, st.job.lease_token, self.lease_ms)
                    except errors.Cancelled:
                        self._cancelled(st)
                    except errors.LeaseLost:
                        log.warning("job %s: lease lost while it runs", st.job.id)
                    except (errors.DelayqError, errors.ConnectionFailed) as e:
                        log.warning("job %s: lease extension failed: %s", st.job.id, e)


    def _check_cancelled(self, states: List["_Running"]) -> None:
        """Asks which running jobs were cancelled (``cancel(..., running=True)``) and tells
        their handlers."""
        if not states:
            return
        try:
            found = self.client.cancelled_leases(
                (st.job.queue, st.job.id, st.job.lease_token) for st in states[:1000])
        except (errors.DelayqError, errors.ConnectionFailed) as e:
            log.debug("asking for cancelled leases failed: %s", e)
            return
        gone = {(q, i, t) for q, i, t in found}
        for st in states:
            if (st.job.queue, st.job.id, st.job.lease_token) in gone:
                self._cancelled(st)

    def _cancelled(self, st: "_Running") -> None:
        """The job was cancelled while it ran: its store ended it (nothing to ack or nack);
        its handler is told through ``job.cancelled``."""
        if st.give_up():
            log.info("job %s: cancelled while it runs; its handler is asked to stop", st.job.id)
            st.job.cancelled.set()


class _Running:
    """A job a handler runs: when its lease is next extended, when it times out, and whether
    it finished or was given up (whichever comes first wins)."""

    def __init__(self, job: ClaimedJob, lease_ms: int):
        now = time.monotonic()
        self.job = job
        self.period = max(lease_ms / 3000, 0.01)
        self.next_extend = now + self.period
        self.deadline = None if job.timeout_ms is None else now + job.timeout_ms / 1000
        self.done = False
        self._lock = threading.Lock()

    def finish(self) -> bool:
        """The handler returned: whether its outcome counts (not given up before)."""
        with self._lock:
            if self.done:
                return False
            self.done = True
            return True

    def give_up(self) -> bool:
        """Past the timeout: whether this gives the job up (the handler had not finished)."""
        return self.finish()
