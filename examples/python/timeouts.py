"""The order-timeout story, worker side: cancels orders still unpaid when their timeout
fires. Stops on Ctrl-C / SIGTERM after the job in hand (or with --idle-exit SECONDS).

    python3 timeouts.py http://127.0.0.1:7070

Needs the delayq package: python3 -m venv .venv && .venv/bin/pip install ./clients/python
"""

import argparse
import json
import sys
from typing import List

from delayq import ClaimedJob, Client, Worker

QUEUE = "order-timeouts"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--token")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--idle-exit", type=float)
    a = ap.parse_args()
    cancelled: List[str] = []

    def on_timeout(job: ClaimedJob) -> None:
        order_id = job.payload["order_id"]
        # Real code: cancel the order in the database unless it was paid meanwhile (the
        # payment's cancel can lose the race once the job is running). Raising retries.
        cancelled.append(order_id)
        print(f"cancelling unpaid {order_id} (attempt {job.attempt})", file=sys.stderr, flush=True)

    worker = Worker(Client(a.url, a.token), QUEUE, on_timeout, concurrency=a.concurrency,
                    wait_ms=1000)
    print(f"waiting for order timeouts on {a.url} (queue {QUEUE}); Ctrl-C stops",
          file=sys.stderr, flush=True)
    worker.run(idle_exit=a.idle_exit)
    print(json.dumps({"cancelled": sorted(cancelled)}))


if __name__ == "__main__":
    main()
