"""The client drain benchmark (docs/BENCHMARKS.md, "Clients"): enqueue N no-op jobs (not
timed), then one Worker at concurrency C drains them; prints jobs/s as JSON.

    PYTHONPATH=src python3 bench_drain.py URL [jobs] [concurrency]
"""

import json
import os
import sys
import threading
import time

from delayq import Client, Worker

url = sys.argv[1]
jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
conc = int(sys.argv[3]) if len(sys.argv) > 3 else 16
queue = f"drain-py-{os.getpid()}"
c = Client(url)
for i in range(0, jobs, 1000):
    batch = []
    for k in range(i, min(jobs, i + 1000)):
        oid = "1" + str(k).zfill(19)
        batch.append({"id": oid, "payload": {"orderId": oid, "action": "cancel", "pad": "x" * 39}})
    c.enqueue_many(queue, batch)
done = 0
lock = threading.Lock()
w = None


def handle(job):
    global done
    with lock:
        done += 1
        if done == jobs:
            w.stop()


w = Worker(c, queue, handle, concurrency=conc)
start = time.monotonic()
w.run(install_signal_handlers=False)
s = time.monotonic() - start
st = c.stats(queue)
print(json.dumps({"client": "python", "jobs": jobs, "concurrency": conc, "seconds": s,
                  "jobs_per_s": round(jobs / s), "left": st.scheduled + st.leased}))
