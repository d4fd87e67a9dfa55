"""The scripted worker of the shared worker scenarios (clients/conformance/workers.json): this
package's Worker running the handler the job's payload scripts, printing one JSON line per
start and end. Configured by DELAYQ_URL, DELAYQ_QUEUES, DELAYQ_LEASE_MS, DELAYQ_CONCURRENCY and
DELAYQ_GATES; stops gracefully on SIGTERM (the Worker's own signal handling)."""

import json
import os
import sys
import threading
import time
from typing import Any, Dict

from delayq import ClaimedJob, Client, Dead, Retry, Worker

_out = threading.Lock()


def say(line: Dict[str, Any]) -> None:
    with _out:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def perform(s: Dict[str, Any], job: ClaimedJob) -> Any:
    what = s["do"]
    if what == "ok":
        return s.get("result")
    if what == "fail":
        raise RuntimeError(s.get("error", "failed"))
    if what == "dead":
        raise Dead(s.get("error", "dead"))
    if what == "retry_in":
        if job.attempt > 1 and "then" in s:
            return perform(s["then"], job)
        raise Retry("retry later", delay_ms=s["ms"])
    if what == "hold":
        gate = os.path.join(os.environ["DELAYQ_GATES"], s["gate"])
        while not os.path.exists(gate):
            if job.cancelled.wait(0.01):
                say({"aborted": job.id})
                return None
        return perform(s["then"], job) if "then" in s else None
    raise ValueError(f"no such script {what!r}")


def handler(job: ClaimedJob) -> Any:
    say({"start": job.id, "attempt": job.attempt, "queue": job.queue})
    try:
        return perform(job.payload, job)
    finally:
        say({"end": job.id})


def main() -> None:
    queues = [(name, weight) for name, weight in json.loads(os.environ["DELAYQ_QUEUES"])]
    worker = Worker(Client(os.environ["DELAYQ_URL"]), queues, handler,
                    concurrency=int(os.environ["DELAYQ_CONCURRENCY"]),
                    lease_ms=int(os.environ["DELAYQ_LEASE_MS"]), wait_ms=1000)
    say({"ready": True})
    worker.run()


if __name__ == "__main__":
    main()
