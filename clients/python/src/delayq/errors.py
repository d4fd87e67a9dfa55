"""Typed errors: every error answer of the API maps to one class by its stable ``code``."""

from __future__ import annotations

from typing import Any, Dict, Optional


class DelayqError(Exception):
    """An error answer of the server (``status``, stable ``code``, readable ``message``).

    ``state`` is set on 409 answers that say where the job is now (``leased``, ``dead`` ...);
    ``retry_after`` on answers that say when to try again (``Retry-After``, seconds).
    """

    def __init__(self, status: int, code: str, message: str, state: Optional[str] = None,
                 retry_after: Optional[int] = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.state = state
        self.retry_after = retry_after


class InvalidInput(DelayqError):
    """400: the request was refused (``invalid_*`` codes); nothing was written."""


class Unauthorized(DelayqError):
    """401: missing or wrong token."""


class Forbidden(DelayqError):
    """403: the token's scope does not allow this call."""


class NotFound(DelayqError):
    """404: no such job (done, cancelled, never enqueued), schedule or endpoint."""


class Conflict(DelayqError):
    """409: the job or queue is in a state that refuses this call (see ``state``)."""


class LeaseLost(Conflict):
    """409 ``lease_lost``: the lease expired or the token is not the current one."""


class Cancelled(Conflict):
    """The job was cancelled while it ran: its lease can no longer be extended, acked or
    nacked; stop the handler."""


class JobLeased(Conflict):
    """409 ``job_leased``: a consumer holds the job."""


class JobDead(Conflict):
    """409 ``job_dead``: the job is dead-lettered."""


class JobNotDead(Conflict):
    """409 ``job_not_dead``: a dead-letter action on a job that is not dead."""


class PayloadTooLarge(DelayqError):
    """413: the payload or body is over the server's limit."""


class TooManyLongPolls(DelayqError):
    """429: this token already has the most long polls waiting."""


class Unavailable(DelayqError):
    """503: the server cannot reach its store (retried by the client first)."""


class StoreFull(DelayqError):
    """507: the store is out of memory; nothing was written."""


class ServerError(DelayqError):
    """500 and other unexpected answers."""


class ConnectionFailed(Exception):
    """The server could not be reached (after the client's retries)."""


_BY_CODE = {
    "lease_lost": LeaseLost,
    "cancelled": Cancelled,
    "job_leased": JobLeased,
    "job_dead": JobDead,
    "job_not_dead": JobNotDead,
    "conflict": Conflict,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "no_route": NotFound,
    "payload_too_large": PayloadTooLarge,
    "body_too_large": PayloadTooLarge,
    "too_many_long_polls": TooManyLongPolls,
    "unavailable": Unavailable,
    "request_timeout": Unavailable,
    "store_full": StoreFull,
}


def from_answer(status: int, body: Dict[str, Any], retry_after: Optional[int] = None) -> DelayqError:
    """The typed error of an error answer (``retry_after``: its ``Retry-After``, seconds)."""
    code = str(body.get("code") or "unknown")
    message = str(body.get("message") or "")
    cls = _BY_CODE.get(code)
    if cls is None:
        if status == 400 or code.startswith("invalid_") or status in (405, 415):
            cls = InvalidInput
        else:
            cls = ServerError
    return cls(status, code, message, body.get("state"), retry_after)
