"""Client calls against a live server: every call, typed errors, retries that never store a
job twice."""

import asyncio
import time
import unittest

import delayq
from delayq import Client, InvalidInput, LeaseLost, NotFound

from _live import URL, Local, forward, needs_server, queue


@needs_server
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.c = Client(URL)
        self.q = queue("py")

    def test_enqueue_get_cancel(self):
        e = self.c.enqueue(self.q, {"order": 42}, id="order-42", delay_ms=60_000)
        self.assertEqual((e.id, e.created), ("order-42", True))
        again = self.c.enqueue(self.q, {"order": 42}, id="order-42", delay_ms=60_000)
        self.assertFalse(again.created)
        self.assertEqual(again.due_at, e.due_at)
        j = self.c.get(self.q, "order-42")
        self.assertEqual((j.state, j.payload, j.attempt), ("scheduled", {"order": 42}, 0))
        self.assertEqual(self.c.cancel(self.q, "order-42"), "cancelled")
        self.assertEqual(self.c.cancel(self.q, "order-42"), "not_found")
        with self.assertRaises(NotFound) as ctx:
            self.c.get(self.q, "order-42")
        self.assertEqual(ctx.exception.code, "not_found")

    def test_traces_are_forwarded_when_opentelemetry_is_installed(self):
        import delayq._bodies as dc

        tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

        class Propagate:  # what opentelemetry.propagate.inject does with an active span
            @staticmethod
            def inject(carrier):
                carrier["traceparent"] = tp
                carrier["tracestate"] = "congo=t61rcWkgMzE"

        saved = dc._otel_propagate
        try:
            dc._otel_propagate = None
            self.c.enqueue(self.q, 1, id="untraced")
            dc._otel_propagate = Propagate
            self.c.enqueue(self.q, 2, id="traced")
        finally:
            dc._otel_propagate = saved
        self.assertIsNone(self.c.get(self.q, "untraced").traceparent)
        j = self.c.get(self.q, "traced")
        self.assertEqual((j.traceparent, j.tracestate), (tp, "congo=t61rcWkgMzE"))
        # An explicit context wins; a claimed job carries its context.
        own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        self.c.enqueue(self.q, 3, id="own", traceparent=own)
        claimed = {j.id: j for j in self.c.claim(self.q, max=10)}
        self.assertEqual(claimed["traced"].traceparent, tp)
        self.assertEqual(claimed["own"].traceparent, own)
        self.assertIsNone(claimed["untraced"].traceparent)

    def test_ids_are_made_by_the_client(self):
        e = self.c.enqueue(self.q, "x")
        self.assertEqual(len(e.id), 32)
        self.assertTrue(e.created)

    def test_bytes_payloads_and_fields(self):
        e = self.c.enqueue(self.q, b"\x00\xffraw", priority=7, timeout_ms=5_000,
                           max_attempts=3, backoff={"kind": "fixed", "delay_ms": 100},
                           run_at=0, expire_after_ms=60_000)
        j = self.c.get(self.q, e.id)
        self.assertEqual(j.payload, b"\x00\xffraw")
        self.assertEqual((j.priority, j.timeout_ms, j.max_attempts), (7, 5_000, 3))
        self.assertIsNotNone(j.expires_at)

    def test_claim_ack_nack_extend_release(self):
        self.c.enqueue(self.q, {"n": 1}, id="a")
        [job] = self.c.claim(self.q, max=5, lease_ms=5_000, wait_ms=1_000)
        self.assertEqual((job.id, job.attempt, job.payload), ("a", 1, {"n": 1}))
        deadline = self.c.extend(self.q, job.id, job.lease_token, 10_000)
        self.assertGreaterEqual(deadline, job.lease_deadline)
        out = self.c.nack(self.q, job.id, job.lease_token, error="boom", retry_in_ms=0)
        self.assertEqual(out["outcome"], "retrying")
        with self.assertRaises(LeaseLost):
            self.c.ack(self.q, job.id, job.lease_token)
        [job] = self.c.claim(self.q, wait_ms=2_000)
        self.assertEqual((job.attempt, job.last_error), (2, "boom"))
        self.c.release(self.q, job.id, job.lease_token)
        [job] = self.c.claim(self.q, wait_ms=2_000)
        self.assertEqual(job.attempt, 2, "a release does not count the attempt")
        self.c.ack(self.q, job.id, job.lease_token)
        with self.assertRaises(NotFound):
            self.c.get(self.q, "a")

    def test_ack_many_and_cut_poll(self):
        self.c.enqueue_many(self.q, [{"payload": i, "id": f"m{i}"} for i in range(3)])
        jobs = self.c.claim(self.q, max=3)
        tokens = {j.id: j.lease_token for j in jobs}
        out = self.c.ack_many(self.q, [("m0", tokens["m0"]), ("m1", tokens["m1"] + 99),
                                       ("nope", 1), ("m2", tokens["m2"])])
        self.assertEqual(out, ["acked", "lease_lost", "not_found", "acked"])
        self.assertEqual(self.c.get(self.q, "m1").state, "leased")
        with self.assertRaises(NotFound):
            self.c.get(self.q, "m0")
        # A cut sent first ends the poll it names as soon as it comes.
        self.c.cut_poll(self.q, "p-1")
        t = time.monotonic()
        self.assertEqual(self.c.claim(self.q, wait_ms=20_000, poll_id="p-1"), [])
        self.assertLess(time.monotonic() - t, 10)
        with self.assertRaises(InvalidInput):
            self.c.cut_poll(self.q, "bad id")

    def test_reschedule_run_now_and_listing(self):
        for i in range(3):
            self.c.enqueue(self.q, i, id=f"j{i}", delay_ms=3_600_000)
        due = self.c.reschedule(self.q, "j0", delay_ms=7_200_000)
        self.assertGreater(due, self.c.get(self.q, "j1").due_at)
        page = self.c.list_jobs(self.q, "scheduled", limit=2)
        self.assertEqual([j.id for j in page.jobs], ["j1", "j2"])
        rest = self.c.list_jobs(self.q, "scheduled", limit=2, cursor=page.next_cursor)
        self.assertEqual([j.id for j in rest.jobs], ["j0"])
        self.c.run_now(self.q, "j2")
        [job] = self.c.claim(self.q, wait_ms=1_000)
        self.assertEqual(job.id, "j2")

    def test_enqueue_many(self):
        out = self.c.enqueue_many(self.q, [{"payload": i, "delay_ms": 1000} for i in range(5)]
                                  + [{"payload": "x", "id": "fixed"}])
        self.assertEqual(len(out), 6)
        self.assertTrue(all(e.created for e in out))
        self.assertEqual(out[-1].id, "fixed")
        st = self.c.stats(self.q)  # scheduled: due later; due: due now
        self.assertEqual(st.scheduled + st.due, 6)

    def test_whoami(self):
        # The test server has no tokens: whoever reaches it may do everything.
        self.assertEqual(self.c.whoami(), {
            "scope": "all",
            "allows": ["read", "produce", "consume", "admin"],
            "tokens_required": False,
        })

    def test_typed_errors(self):
        with self.assertRaises(InvalidInput) as ctx:
            self.c.enqueue(self.q, 1, delay_ms=-1)
        self.assertEqual(ctx.exception.code, "invalid_delay")
        with self.assertRaises(InvalidInput) as ctx:
            self.c.enqueue(self.q, 1, target={"url": "ftp://nope/"})
        self.assertEqual(ctx.exception.code, "invalid_target")
        with self.assertRaises(InvalidInput):
            self.c.enqueue("bad name!", 1)
        with self.assertRaises(TypeError):
            self.c.enqueue_many(self.q, [{"payload": 1, "nope": 2}])

    def test_queue_settings_stats_and_pause(self):
        s = self.c.configure(self.q, rate={"per_s": 5, "burst": 2}, keep_done_ms=60_000)
        self.assertEqual(s.settings["rate"], {"per_s": 5.0, "burst": 2})
        s = self.c.configure(self.q, rate=None)
        self.assertIsNone(s.settings["rate"])
        self.assertEqual(s.settings["keep_done_ms"], 60_000)
        self.c.enqueue(self.q, 1)
        self.assertIn(self.q, [q.queue for q in self.c.queues()])
        self.c.pause(self.q)
        self.assertTrue(self.c.stats(self.q).paused)
        self.assertEqual(self.c.claim(self.q), [])
        self.c.resume(self.q)
        self.assertEqual(len(self.c.claim(self.q, wait_ms=1_000)), 1)

    def test_dead_letters(self):
        self.c.enqueue(self.q, 1, id="d")
        [job] = self.c.claim(self.q, wait_ms=1_000)
        self.assertEqual(self.c.nack(self.q, "d", job.lease_token, error="bad", dead=True)["outcome"], "dead")
        [dead] = self.c.dead(self.q)
        self.assertEqual((dead.id, dead.last_error), ("d", "bad"))
        self.c.requeue(self.q, "d")
        self.assertEqual(self.c.get(self.q, "d").state, "scheduled")
        [job] = self.c.claim(self.q, wait_ms=1_000)
        self.c.nack(self.q, "d", job.lease_token, dead=True)
        self.assertEqual(self.c.purge_dead(self.q), 1)

    def test_schedules(self):
        s = self.c.put_schedule(self.q, "nightly", {"report": True}, cron="0 3 * * *", tz="Europe/Paris")
        self.assertEqual(s["name"], "nightly")
        self.assertIn("next_fire", s)
        self.assertEqual([x["name"] for x in self.c.schedules(self.q)], ["nightly"])
        self.assertEqual(self.c.schedule(self.q, "nightly")["tz"], "Europe/Paris")
        with self.assertRaises(InvalidInput) as ctx:
            self.c.put_schedule(self.q, "bad", 1, cron="61 * * * *")
        self.assertEqual(ctx.exception.code, "invalid_schedule")
        self.c.delete_schedule(self.q, "nightly")
        with self.assertRaises(NotFound):
            self.c.schedule(self.q, "nightly")

    def test_a_503_that_hid_a_write_stores_one_job(self):
        # A proxy that passes the first enqueue on to the server but answers 503, as a
        # server would whose store wrote the job and then became unreachable.
        calls = []

        def handle(req, body):
            status, headers, out = forward(req, body)
            calls.append(status)
            if len(calls) == 1:
                return 503, headers, b'{"code":"unavailable","message":"store unreachable"}'
            return status, headers, out

        proxy = Local(handle)
        try:
            c = Client(proxy.url, retries=3, backoff=0.01)
            e = c.enqueue(self.q, {"order": 7})
        finally:
            proxy.close()
        self.assertEqual(calls, [201, 200], "written once, then found by the retry")
        self.assertFalse(e.created)
        st = self.c.stats(self.q)
        self.assertEqual(st.scheduled + st.due, 1)
        ids = {p[3] for p in proxy.requests}
        self.assertEqual(len(ids), 1, "the retry sent the same body, with the same id")

    def test_errors_carry_retry_after(self):
        # A proxy answering 429 with Retry-After, as a server over a budget does.
        def handle(req, body):
            return 429, {"Retry-After": "7", "Content-Type": "application/json"}, \
                b'{"code":"too_many_long_polls","message":"over the budget"}'

        proxy = Local(handle)
        try:
            with self.assertRaises(delayq.DelayqError) as ctx:
                Client(proxy.url, retries=0).stats(self.q)
        finally:
            proxy.close()
        e = ctx.exception
        self.assertEqual((e.status, e.code, e.retry_after), (429, "too_many_long_polls", 7))

    def test_connection_errors_are_retried_then_typed(self):
        c = Client("http://127.0.0.1:9", retries=2, backoff=0.01)
        with self.assertRaises(delayq.ConnectionFailed):
            c.stats(self.q)

    def test_the_async_client_retries_and_types_errors_as_the_client_does(self):
        # The retries are written once (_ops.py); this checks the async transport feeds them.
        calls = []

        def handle(req, body):
            status, headers, out = forward(req, body)
            calls.append(status)
            if len(calls) == 1:
                return 503, headers, b'{"code":"unavailable","message":"store unreachable"}'
            if req.command == "GET":
                return 429, {"Retry-After": "7", "Content-Type": "application/json"}, \
                    b'{"code":"too_many_long_polls","message":"over the budget"}'
            return status, headers, out

        async def run():
            async with delayq.AsyncClient(proxy.url, retries=3, backoff=0.01) as c:
                e = await c.enqueue(self.q, {"order": 8})
                with self.assertRaises(delayq.DelayqError) as ctx:
                    await c.stats(self.q)
            async with delayq.AsyncClient("http://127.0.0.1:9", retries=2, backoff=0.01) as dead:
                with self.assertRaises(delayq.ConnectionFailed):
                    await dead.stats(self.q)
            return e, ctx.exception

        proxy = Local(handle)
        try:
            e, err = asyncio.run(run())
        finally:
            proxy.close()
        self.assertEqual(calls[:2], [201, 200], "written once, then found by the retry")
        self.assertFalse(e.created)
        self.assertEqual((err.status, err.code, err.retry_after), (429, "too_many_long_polls", 7))

    def test_version(self):
        self.assertEqual(delayq.API_VERSION, "v1")
        self.assertRegex(delayq.__version__, r"^\d+\.\d+\.\d+$")


if __name__ == "__main__":
    unittest.main()
