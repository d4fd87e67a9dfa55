"""A tiny client of delayq's HTTP API using only the Python standard library."""

import json
import uuid
import urllib.error
import urllib.request


class DelayqError(Exception):
    """An error answer of the API: `code` is stable (see docs/API.md), `message` readable."""

    def __init__(self, status, code, message):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class Client:
    def __init__(self, base_url, queue, token=None, timeout=90):
        self.base = base_url.rstrip("/")
        self.queue = queue
        self.token = token
        self.timeout = timeout

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            err = json.loads(e.read() or b"{}")
            raise DelayqError(e.code, err.get("code"), err.get("message")) from None

    def _q(self, rest=""):
        return f"/v1/queues/{self.queue}{rest}"

    def enqueue(self, payload, id=None, delay_ms=None, run_at=None, max_attempts=None):
        # An id before the first try: retrying after a 503 (outcome unknown) is then safe.
        if id is None:
            id = uuid.uuid4().hex
        body = {"payload": payload}
        for k, v in (("id", id), ("delay_ms", delay_ms), ("run_at", run_at),
                     ("max_attempts", max_attempts)):
            if v is not None:
                body[k] = v
        return self._call("POST", self._q("/jobs"), body)

    def cancel(self, id):
        return self._call("DELETE", self._q(f"/jobs/{id}"))

    def get(self, id):
        return self._call("GET", self._q(f"/jobs/{id}"))

    def claim(self, max=10, lease_ms=30000, wait_ms=30000):
        body = {"max": max, "lease_ms": lease_ms, "wait_ms": wait_ms}
        return self._call("POST", self._q("/claim"), body)["jobs"]

    def ack(self, job):
        return self._call("POST", self._q(f"/jobs/{job['id']}/ack"),
                          {"lease_token": job["lease_token"]})

    def nack(self, job, error, retry_in_ms=None, dead=False):
        body = {"lease_token": job["lease_token"], "error": error, "dead": dead}
        if retry_in_ms is not None:
            body["retry_in_ms"] = retry_in_ms
        return self._call("POST", self._q(f"/jobs/{job['id']}/nack"), body)

    def stats(self):
        return self._call("GET", self._q())
