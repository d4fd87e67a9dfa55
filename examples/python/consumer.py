"""A consumer loop: claim (long poll), handle, ack or nack.

    python3 consumer.py http://127.0.0.1:7070 orders --idle-exit 3
"""

import argparse
import json

from delayq_client import Client, DelayqError


def handle(job):
    if job["payload"].get("cursed"):
        raise RuntimeError("payment provider returned 500")
    # Cancel the unpaid order here.


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("queue")
    ap.add_argument("--idle-exit", type=float, default=None,
                    help="stop after this many seconds without a job")
    args = ap.parse_args()
    c = Client(args.url, args.queue)
    acked, nacked = [], 0
    wait_ms = int(args.idle_exit * 1000) if args.idle_exit else 30000
    while True:
        jobs = c.claim(max=10, lease_ms=30000, wait_ms=wait_ms)
        if not jobs and args.idle_exit:
            break
        for job in jobs:
            try:
                handle(job)
            except Exception as e:  # the attempt failed: retry soon, dead after max_attempts
                c.nack(job, str(e), retry_in_ms=100)
                nacked += 1
                continue
            try:
                c.ack(job)
                acked.append(job["id"])
            except DelayqError as e:
                if e.code != "lease_lost":
                    raise
    print(json.dumps({"acked": sorted(acked), "nacked": nacked}))


if __name__ == "__main__":
    main()
