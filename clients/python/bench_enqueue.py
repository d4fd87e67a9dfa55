"""The client enqueue benchmark (docs/BENCHMARKS.md, "Clients"): N enqueues awaited one by one,
due in an hour, with the synchronous Client and then the AsyncClient; prints jobs/s as JSON.

    PYTHONPATH=src python3 bench_enqueue.py URL [jobs]
"""

import asyncio
import json
import os
import sys
import time

from delayq import AsyncClient, Client


def sync(url: str, jobs: int) -> float:
    c = Client(url)
    q = f"enqueue-py-{os.getpid()}"
    c.enqueue(q, {"warm": True}, delay_ms=3_600_000)
    start = time.perf_counter()
    for i in range(jobs):
        c.enqueue(q, {"orderId": i, "action": "cancel", "pad": "x" * 39}, delay_ms=3_600_000)
    return time.perf_counter() - start


async def awaited(url: str, jobs: int) -> float:
    async with AsyncClient(url) as c:
        q = f"enqueue-pyasync-{os.getpid()}"
        await c.enqueue(q, {"warm": True}, delay_ms=3_600_000)
        start = time.perf_counter()
        for i in range(jobs):
            await c.enqueue(q, {"orderId": i, "action": "cancel", "pad": "x" * 39},
                            delay_ms=3_600_000)
        return time.perf_counter() - start


def main() -> None:
    url = sys.argv[1]
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    for name, s in (("python", sync(url, jobs)), ("python-async", asyncio.run(awaited(url, jobs)))):
        print(json.dumps({"client": name, "jobs": jobs, "seconds": s, "jobs_per_s": round(jobs / s)}))


if __name__ == "__main__":
    main()
