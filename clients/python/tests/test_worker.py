"""The workers against a live server: a handler that fails then succeeds, a slow handler kept
alive by lease extension, graceful stop on SIGTERM, and the asyncio worker."""

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

from delayq import AsyncClient, AsyncWorker, Client, Dead, NotFound, Worker

from _live import URL, needs_server, queue, wait_for


@needs_server
class WorkerTest(unittest.TestCase):
    def setUp(self):
        self.c = Client(URL)
        self.q = queue("pyw")

    def test_fails_then_succeeds(self):
        self.c.enqueue(self.q, {"n": 1}, id="flaky", backoff={"kind": "fixed", "delay_ms": 100})
        seen = []

        def handler(job):
            seen.append(job.attempt)
            if job.attempt == 1:
                raise RuntimeError("first time fails")

        w = Worker(self.c, self.q, handler, wait_ms=200)
        w.run(install_signal_handlers=False, idle_exit=1.0)
        self.assertEqual(seen, [1, 2])
        self.assertEqual((w.acked, w.failed), (1, 1))
        with self.assertRaises(NotFound):
            self.c.get(self.q, "flaky")

    def test_several_queues_in_strict_order_and_by_weight(self):
        first, second = queue("pyw-first"), queue("pyw-second")
        for q in (first, second):
            self.c.enqueue_many(q, [{"id": f"j{i}", "payload": i} for i in range(20)])
        seen = []
        w = Worker(self.c, [first, second], lambda job: seen.append(job.queue), concurrency=1,
                   wait_ms=200, strict=True)
        w.run(install_signal_handlers=False, idle_exit=0.5)
        self.assertEqual(seen, [first] * 20 + [second] * 20)
        self.assertEqual(w.acked, 40)
        for q in (first, second):
            with self.assertRaises(NotFound):
                self.c.get(q, "j0")
        # A claim over several queues shares by weight: 3:1 over 400 one-job claims.
        heavy, light = queue("pyw-heavy"), queue("pyw-light")
        for q in (heavy, light):
            self.c.enqueue_many(q, [{"id": f"j{i}", "payload": i} for i in range(400)])
        got = [self.c.claim_many([(heavy, 3), (light, 1)])[0].queue for _ in range(400)]
        self.assertTrue(255 <= got.count(heavy) <= 345, got.count(heavy))

    def test_a_handlers_return_value_is_the_jobs_result(self):
        self.c.configure(self.q, keep_done_ms=600_000)
        for id in ("mail", "bytes", "nothing", "huge"):
            self.c.enqueue(self.q, {"to": "a@example.com"}, id=id)
        results = {"mail": {"sent": True, "to": "a@example.com"}, "bytes": b"\x00\xff\x07",
                   "nothing": None, "huge": "x" * 70_000}
        w = Worker(self.c, self.q, lambda job: results[job.id], wait_ms=200)
        w.run(install_signal_handlers=False, idle_exit=0.5)
        self.assertEqual(self.c.get(self.q, "mail").result, {"sent": True, "to": "a@example.com"})
        self.assertEqual(self.c.get(self.q, "bytes").result, b"\x00\xff\x07")
        nothing = self.c.get(self.q, "nothing")
        self.assertEqual((nothing.state, nothing.result), ("done", None))
        huge = self.c.get(self.q, "huge")
        self.assertEqual(huge.state, "dead")
        self.assertIn("over the limit of 65535 bytes", huge.last_error)

    def test_dead_and_errors_are_stored(self):
        self.c.enqueue(self.q, 1, id="poison")

        def handler(job):
            raise Dead("cannot be processed")

        Worker(self.c, self.q, handler, wait_ms=200).run(install_signal_handlers=False, idle_exit=0.5)
        j = self.c.get(self.q, "poison")
        self.assertEqual(j.state, "dead")
        self.assertEqual(j.last_error, "Dead: cannot be processed")

    def test_a_slow_handler_keeps_its_lease(self):
        self.c.enqueue(self.q, 1, id="slow")
        runs = []

        def handler(job):
            runs.append(job.attempt)
            time.sleep(1.5)

        # A 300 ms lease: without extensions it would expire five times over.
        w = Worker(self.c, self.q, handler, concurrency=2, lease_ms=300, wait_ms=200)
        t = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False, "idle_exit": 2.5})
        t.start()
        t.join(20)
        self.assertEqual(runs, [1], "delivered once: the lease was extended")
        self.assertEqual(w.acked, 1)

    def test_concurrency_limit(self):
        for i in range(6):
            self.c.enqueue(self.q, i)
        running, peak, lock = [0], [0], threading.Lock()

        def handler(job):
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            time.sleep(0.2)
            with lock:
                running[0] -= 1

        w = Worker(self.c, self.q, handler, concurrency=3, wait_ms=200)
        w.run(install_signal_handlers=False, idle_exit=0.6)
        self.assertEqual(w.acked, 6)
        self.assertEqual(peak[0], 3)

    def test_sigterm_finishes_the_running_job(self):
        self.c.enqueue(self.q, 1, id="inflight")
        code = (
            "import sys, time\n"
            "from delayq import Client, Worker\n"
            "def h(job):\n"
            "    print('started', flush=True); time.sleep(1.0)\n"
            f"w = Worker(Client({URL!r}), {self.q!r}, h, wait_ms=200)\n"
            "w.run()\n"
            "print('acked', w.acked, flush=True)\n"
        )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
        self.assertEqual(p.stdout.readline().strip(), "started")
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0)
        self.assertIn("acked 1", out)
        with self.assertRaises(NotFound):
            self.c.get(self.q, "inflight")

    def test_sigterm_cuts_the_long_poll_short(self):
        code = (
            "from delayq import Client, Worker\n"
            f"w = Worker(Client({URL!r}), {self.q!r}, lambda job: None, wait_ms=30_000)\n"
            "print('ready', flush=True)\n"
            "w.run()\n"
            "print('stopped', w.acked, flush=True)\n"
        )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
        self.assertEqual(p.stdout.readline().strip(), "ready")
        time.sleep(0.5)  # its first claim waits on the server (30 s)
        t = time.monotonic()
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=25)
        self.assertEqual(p.returncode, 0)
        self.assertIn("stopped 0", out)
        self.assertLess(time.monotonic() - t, 10, "the worker waited out its long poll")
        self.c.enqueue(self.q, 1, id="after")
        st = self.c.stats(self.q)
        self.assertEqual((st.due, st.leased), (1, 0), "the cut poll leased nothing")


@needs_server
class AsyncWorkerTest(unittest.TestCase):
    def test_async_client_and_worker(self):
        q = queue("pya")

        async def main():
            c = AsyncClient(URL)
            e = await c.enqueue(q, {"n": 1}, id="a1")
            self.assertTrue(e.created)
            await c.enqueue(q, {"n": 2}, id="a2", backoff={"kind": "fixed", "delay_ms": 50})
            seen = []

            async def handler(job):
                seen.append((job.id, job.attempt))
                await asyncio.sleep(0.05)
                if job.id == "a2" and job.attempt == 1:
                    raise ValueError("once")

            w = AsyncWorker(c, q, handler, concurrency=2, wait_ms=200)
            await w.run(install_signal_handlers=False, idle_exit=1.0)
            return w, seen

        w, seen = asyncio.run(main())
        self.assertEqual(sorted(seen), [("a1", 1), ("a2", 1), ("a2", 2)])
        self.assertEqual((w.acked, w.failed), (2, 1))

    def test_async_worker_over_several_queues_keeps_results(self):
        first, second = queue("pya-first"), queue("pya-second")
        c = Client(URL)
        for q in (first, second):
            c.configure(q, keep_done_ms=600_000)
            c.enqueue_many(q, [{"id": f"j{i}", "payload": i} for i in range(5)])

        async def main():
            seen = []

            async def handler(job):
                seen.append(job.queue)
                return {"queue": job.queue, "n": job.payload}

            w = AsyncWorker(AsyncClient(URL), [first, second], handler, concurrency=1,
                            wait_ms=200, strict=True)
            await w.run(install_signal_handlers=False, idle_exit=0.5)
            return w, seen

        w, seen = asyncio.run(main())
        self.assertEqual(seen, [first] * 5 + [second] * 5)
        self.assertEqual(w.acked, 10)
        self.assertEqual(c.get(second, "j3").result, {"queue": second, "n": 3})

    def test_stop_cuts_the_async_long_poll_short(self):
        q = queue("pyc")

        async def main():
            w = AsyncWorker(AsyncClient(URL), q, lambda job: asyncio.sleep(0), wait_ms=30_000)
            asyncio.get_running_loop().call_later(0.5, w.stop)
            t = time.monotonic()
            await w.run(install_signal_handlers=False)
            return time.monotonic() - t

        took = asyncio.run(main())
        self.assertLess(took, 10, "the worker waited out its long poll")

    def test_a_job_cancelled_while_it_runs_cancels_the_async_handler(self):
        q = queue("pyx")

        async def main():
            c = AsyncClient(URL)
            await c.enqueue(q, {"n": 1}, id="long")
            started, stopped = asyncio.Event(), asyncio.Event()

            async def handler(job):
                started.set()
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    self.assertTrue(job.cancelled.is_set())
                    stopped.set()
                    raise

            w = AsyncWorker(c, q, handler, concurrency=1, wait_ms=200)
            run = asyncio.create_task(w.run(install_signal_handlers=False))
            await asyncio.wait_for(started.wait(), 10)
            self.assertEqual(await c.cancel(q, "long", running=True), "cancelling")
            t = time.monotonic()
            await asyncio.wait_for(stopped.wait(), 5)
            heard = time.monotonic() - t
            w.stop()
            await run
            with self.assertRaises(NotFound):
                await c.get(q, "long")
            return w, heard

        w, heard = asyncio.run(main())
        self.assertLess(heard, 2.0, "told within the worker's half-second check")
        self.assertEqual((w.acked, w.failed), (0, 0), "neither acked nor nacked")


if __name__ == "__main__":
    unittest.main()


@needs_server
class FaultTest(unittest.TestCase):
    """The faults every client is held to: a job past its timeout_ms, a server restarted
    mid-run (with ``DELAYQ_BIN`` the test starts and kills its own server)."""

    def test_a_job_past_its_timeout_is_given_up(self):
        c = Client(URL)
        q = queue("pyt")
        c.enqueue(q, "hang", id="hang", timeout_ms=200, max_attempts=1)
        release = threading.Event()
        w = Worker(c, q, lambda job: release.wait(10), wait_ms=200)
        t = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False})
        t.start()
        try:
            job = wait_for(lambda: (lambda j: j if j.state == "dead" else None)(c.get(q, "hang")))
            self.assertEqual(job.last_error, "timeout")
        finally:
            release.set()
            w.stop()
            t.join()

    @unittest.skipUnless(os.environ.get("DELAYQ_BIN"), "DELAYQ_BIN is not set")
    def test_a_worker_carries_on_across_a_server_restart(self):
        import re
        import shutil
        import tempfile

        data = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, data, ignore_errors=True)

        def serve(listen):
            p = subprocess.Popen([os.environ["DELAYQ_BIN"], "--data", data, "serve", "--listen", listen],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            line = p.stdout.readline()
            threading.Thread(target=p.stdout.read, daemon=True).start()
            return p, re.search(r"http://([0-9.]+:\d+)", line).group(1)

        server, addr = serve("127.0.0.1:0")
        c = Client(f"http://{addr}")
        q = queue("pyr")
        for n in range(10):
            c.enqueue(q, n, id=f"now-{n}")
            c.enqueue(q, n, id=f"later-{n}", delay_ms=1500)
        seen = set()
        w = Worker(c, q, lambda job: seen.add(job.id), concurrency=4, wait_ms=500)
        t = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False})
        t.start()
        try:
            wait_for(lambda: len(seen) >= 10)
            server.kill()
            server.wait()
            time.sleep(0.3)  # real time: the worker meets a dead server and keeps trying
            server, _ = serve(addr)
            wait_for(lambda: len(seen) == 20, timeout=30)
        finally:
            w.stop()
            t.join()
            s = c.stats(q)
            server.terminate()
            server.wait()
        self.assertEqual((s.scheduled + s.due, s.leased, s.dead), (0, 0, 0))
