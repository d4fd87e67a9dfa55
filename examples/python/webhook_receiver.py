"""A receiver of delayq's push deliveries (no worker at all): `delayq serve --push` sends each
due job with a target here; the request is verified before it is trusted.

    python3 webhook_receiver.py 8080 whsec_...   # the secret given to serve --push-secret
    # then enqueue with "target": {"url": "http://HOST:8080/order-timeout"}

Answer 2xx when done; 5xx (or 503 with Retry-After) makes delayq retry. The webhook-id is the
job id and stays the same on retries: use it to ignore a repeated delivery.

Needs the delayq package: python3 -m venv .venv && .venv/bin/pip install ./clients/python
"""

import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Set

from delayq import WebhookVerificationError, verify_webhook

SECRET = sys.argv[2] if len(sys.argv) > 2 else ""
seen: Set[str] = set()


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            msg = verify_webhook(SECRET, dict(self.headers.items()), body)
        except WebhookVerificationError as e:
            self.send_error(401, str(e))
            return
        if msg.id not in seen:
            seen.add(msg.id)
            order = msg.payload
            print(f"attempt {self.headers['delayq-attempt']}: cancelling unpaid {order}", flush=True)
        self.send_response(204)
        self.end_headers()


if __name__ == "__main__":
    HTTPServer(("0.0.0.0", int(sys.argv[1])), Hook).serve_forever()
