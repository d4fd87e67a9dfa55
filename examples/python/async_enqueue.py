"""The asyncio client (``pip install "delayq[async]"``): enqueue an order's timeout, read it
back, cancel it once the order is paid.

    DELAYQ_URL=http://127.0.0.1:7070 python3 async_enqueue.py
"""

import asyncio
import os

from delayq import AsyncClient


async def main() -> None:
    async with AsyncClient(os.environ.get("DELAYQ_URL", "http://127.0.0.1:7070")) as client:
        e = await client.enqueue("orders", {"order": 42}, id="order-42", delay_ms=30 * 60 * 1000)
        job = await client.get("orders", e.id)
        print(job.state, job.payload)
        print(await client.cancel("orders", e.id))


if __name__ == "__main__":
    asyncio.run(main())
