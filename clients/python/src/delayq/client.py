"""The synchronous client: every call of the v1 API (``SyncOps``, generated from the calls the
asynchronous client runs) over the standard library's HTTP client, with typed errors and
retries on connection errors and 503.

Retrying is safe for every call: an enqueue gets its id from the client before the first try
(so a retry of a write the server did but could not confirm finds the job and creates
nothing), and acks, nacks and extensions are fenced by the lease token.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.parse
from typing import Optional, Tuple

from . import errors
from ._bodies import (API_VERSION, CancelOutcome, Time, job_body, new_id, request_headers,
                      trace_headers)
from ._sync_ops import SyncOps

__all__ = ["API_VERSION", "CancelOutcome", "Client", "Time", "job_body", "new_id", "trace_headers"]


class Client(SyncOps):
    """A client of one delayq server.

    ``retries`` attempts more are made on connection errors and 503 ``unavailable``, after
    ``backoff`` seconds, doubling.
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.2,
    ):
        super().__init__(base_url, token, timeout, retries, backoff)
        # Keep-alive connections, one per thread.
        self._local = threading.local()

    # ----- transport -----

    def _conn(self, timeout: float) -> http.client.HTTPConnection:
        """This thread's keep-alive connection to the server (one per thread: a connection
        carries one request at a time)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            u = urllib.parse.urlsplit(self.base_url)
            cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
            conn = cls(u.hostname or "127.0.0.1", u.port, timeout=timeout)
            self._local.conn = conn
            self._local.prefix = u.path.rstrip("/")
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _pause(self, seconds: float) -> None:
        time.sleep(seconds)

    def _send(self, method: str, path: str, data: Optional[bytes],
              timeout: float) -> Tuple[int, bytes, Optional[int]]:
        try:
            return self._exchange(method, path, data, timeout)
        except (OSError, socket.timeout, http.client.HTTPException) as e:
            raise errors.ConnectionFailed(f"{method} {path}: {e}") from e

    def _exchange(self, method: str, path: str, data: Optional[bytes],
                  timeout: float) -> Tuple[int, bytes, Optional[int]]:
        """One request on this thread's connection: the answer's status, body and
        ``Retry-After`` (seconds, when given)."""
        headers = request_headers(self.token, data)
        for fresh in (False, True):
            reused = getattr(self._local, "conn", None) is not None and not fresh
            conn = self._conn(timeout)
            try:
                conn.request(method, self._local.prefix + path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                if resp.getheader("connection", "").lower() == "close":
                    self._drop()
                after = (resp.getheader("retry-after") or "").strip()
                return resp.status, raw, int(after) if after.isdigit() else None
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                self._drop()
                # A kept-alive connection the server had closed: once more on a new one.
                if not reused:
                    raise
            except BaseException:
                self._drop()
                raise
        raise AssertionError("unreachable")
