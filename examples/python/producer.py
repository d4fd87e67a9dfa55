"""Places orders whose timeout job cancels them if unpaid.

    python3 producer.py http://127.0.0.1:7070 orders 20
"""

import json
import sys

from delayq_client import Client


def main():
    url, queue, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    c = Client(url, queue)
    created = 0
    for i in range(n):
        # Order 0 is "cursed": its handler always fails, so it ends as a dead letter.
        payload = {"order": i, "cursed": i == 0}
        r = c.enqueue(payload, id=f"order-{i}", delay_ms=200 + 10 * i, max_attempts=2)
        created += r["created"]
    # Enqueue is idempotent by id: a retry after a timeout creates nothing.
    again = c.enqueue({"order": 1}, id="order-1", delay_ms=200)
    print(json.dumps({"created": created, "retry_created": again["created"]}))


if __name__ == "__main__":
    main()
