"""The live server the tests talk to: ``DELAYQ_URL`` (the Rust test that runs these starts a
``delayq serve --push`` and sets it), and small local HTTP helpers."""

import json
import os
import threading
import time
import unittest
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

URL = os.environ.get("DELAYQ_URL")
SECRET = os.environ.get("DELAYQ_TEST_PUSH_SECRET")

needs_server = unittest.skipUnless(URL, "DELAYQ_URL is not set (run through cargo test)")


def queue(prefix: str) -> str:
    """A fresh queue name per test."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(pred, timeout=15.0, every=0.05):
    """Waits until ``pred()`` is truthy; returns it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise AssertionError("timed out waiting")


class Local:
    """A local HTTP server in a thread: ``handle(handler) -> (status, headers, body)``."""

    def __init__(self, handle):
        outer = self
        self.requests = []

        class H(BaseHTTPRequestHandler):
            def _any(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.requests.append((self.command, self.path, dict(self.headers), body))
                status, headers, out = handle(self, body)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def forward(req, body):
    """Sends a request seen by a ``Local`` on to the delayq server; returns its answer."""
    r = urllib.request.Request(URL + req.path, data=body or None, method=req.command)
    for k in ("content-type", "authorization"):
        if req.headers.get(k):
            r.add_header(k, req.headers[k])
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            return resp.status, {"content-type": "application/json"}, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, {"content-type": "application/json"}, e.read()


def json_body(b: bytes):
    return json.loads(b) if b else None
