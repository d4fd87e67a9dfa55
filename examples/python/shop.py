"""The order-timeout story, producer side: every new order gets a job that cancels it if it
is still unpaid after a while; a payment cancels that job.

    python3 shop.py http://127.0.0.1:7070 --orders 20 --pay 5 --timeout-ms 1800000

Needs the delayq package: python3 -m venv .venv && .venv/bin/pip install ./clients/python
"""

import argparse
import json

from delayq import Client

QUEUE = "order-timeouts"


def create_order(client: Client, order_id: str, timeout_ms: int) -> None:
    """On order creation: schedule its cancellation. The job id is the order id, so creating
    the same order twice (a retried request) schedules one job."""
    client.enqueue(QUEUE, {"order_id": order_id}, id=order_id, delay_ms=timeout_ms,
                   max_attempts=5, backoff={"kind": "exponential", "base_ms": 1000, "cap_ms": 60000})


def payment_received(client: Client, order_id: str) -> str:
    """On payment: the timeout must not fire any more."""
    outcome = client.cancel(QUEUE, order_id)
    if outcome == "cancelled":
        return "timeout cancelled"
    if outcome == "leased":
        return "too late: the timeout is running now (the worker should check payment state)"
    return "too late: the timeout already ran"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--orders", type=int, default=10)
    ap.add_argument("--pay", type=int, default=3, help="how many of them get paid")
    ap.add_argument("--timeout-ms", type=int, default=30 * 60 * 1000)
    ap.add_argument("--token")
    a = ap.parse_args()
    client = Client(a.url, a.token)
    ids = [f"order-{n}" for n in range(a.orders)]
    for order_id in ids:
        create_order(client, order_id, a.timeout_ms)
    # A retried "create order" request changes nothing.
    create_order(client, ids[0], a.timeout_ms)
    paid = {order_id: payment_received(client, order_id) for order_id in ids[: a.pay]}
    st = client.stats(QUEUE)  # not run yet: due later, or due and waiting for a worker
    print(json.dumps({"created": len(ids), "paid": paid, "waiting": st.scheduled + st.due}))


if __name__ == "__main__":
    main()
