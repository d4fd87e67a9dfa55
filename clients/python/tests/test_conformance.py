"""The shared conformance suite (``clients/conformance``) run by the Python client: every
scenario against the live server at ``DELAYQ_URL``, and every webhook vector."""

import asyncio
import inspect
import json
import time
import os
import unittest
import uuid

from _live import URL, needs_server

from delayq import AsyncClient, Client, DelayqError, NotFound, verify_webhook
from delayq.webhooks import WebhookVerificationError

HERE = os.path.dirname(os.path.abspath(__file__))
# clients/conformance beside the package, or DELAYQ_CONFORMANCE (the package installed from its
# wheel, away from the repository).
SUITE = os.environ.get("DELAYQ_CONFORMANCE") or os.path.join(HERE, "..", "..", "conformance")


def load(name):
    with open(os.path.join(SUITE, name), encoding="utf-8") as f:
        return json.load(f)


def matches(expect, got):
    """Deep subset match: every key of an expected object, every item of an expected list."""
    if isinstance(expect, dict):
        return isinstance(got, dict) and all(k in got and matches(v, got[k]) for k, v in expect.items())
    if isinstance(expect, list):
        return isinstance(got, list) and len(got) == len(expect) and all(
            matches(e, g) for e, g in zip(expect, got))
    if isinstance(expect, bool) or isinstance(got, bool):
        return expect is got
    if isinstance(expect, (int, float)) and isinstance(got, (int, float)):
        return expect == got
    return expect == got


def job_of(j):
    out = {"id": j.id, "state": j.state, "attempt": j.attempt, "max_attempts": j.max_attempts,
           "payload": j.payload}
    if j.last_error is not None:
        out["last_error"] = j.last_error
    out["result"] = j.result
    if j.key is not None:
        out["key"] = j.key
    return out


def listed(ids):
    return {"count": len(ids), "ids": sorted(ids)}


class Runner:
    """Runs one scenario's steps with the Python client on a fresh queue."""

    def __init__(self, client):
        self.c = client
        self.q = "conf-" + uuid.uuid4().hex[:10]
        self.leases = {}

    def token(self, a):
        if "lease_token" in a:
            return a["lease_token"]
        t = self.leases[a["id"]]
        return t + 1_000_000 if a.get("lease") == "stale" else t

    def step(self, op, a):
        c, q = self.c, self.q
        fields = {k: a[k] for k in ("id", "delay_ms", "run_at", "max_attempts", "priority",
                                    "key", "on_conflict", "target", "depends_on",
                                    "on_dependency_failure", "include_dependency_results")
                  if k in a}
        if op == "enqueue":
            e = c.enqueue(q, a.get("payload"), **fields)
            return {"id": e.id, "created": e.created}
        if op == "enqueue_batch":
            return [{"id": e.id, "created": e.created} for e in c.enqueue_many(q, a["jobs"])]
        if op == "get":
            try:
                return job_of(c.get(q, a["id"]))
            except NotFound:
                return None
        if op == "cancel":
            return c.cancel(q, a["id"], running=bool(a.get("running")))
        if op == "reschedule":
            c.reschedule(q, a["id"], delay_ms=a.get("delay_ms"), run_at=a.get("run_at"))
            return None
        if op == "claim":
            jobs = c.claim(q, max=a.get("max", 1), lease_ms=a.get("lease_ms"))
            for j in jobs:
                self.leases[j.id] = j.lease_token
            jobs = sorted(jobs, key=lambda j: j.id)
            return dict(listed([j.id for j in jobs]), keys=[j.key for j in jobs])
        if op == "ack":
            result = a.get("result")
            if "result_repeat" in a:
                result = result * a["result_repeat"]
            c.ack(q, a["id"], self.token(a), result=result)
            return "acked"
        if op == "nack":
            return c.nack(q, a["id"], self.token(a), error=a.get("error"),
                          retry_in_ms=a.get("retry_in_ms"), dead=a.get("dead", False))["outcome"]
        if op == "extend":
            c.extend(q, a["id"], self.token(a), a.get("lease_ms"))
            return "extended"
        if op == "release":
            c.release(q, a["id"], self.token(a))
            return None
        if op == "list":
            return listed([j.id for j in c.iter_jobs(q, a["state"], page_size=a["page_size"])])
        if op == "list_dead":
            return listed([j.id for j in c.dead(q)])
        if op == "requeue_dead":
            if "id" in a:
                c.requeue(q, a["id"])
                return 1
            return c.requeue_all(q)
        if op == "purge_dead":
            return c.purge_dead(q)
        if op == "put_schedule":
            spec = {k: a[k] for k in ("cron", "tz", "every_ms") if k in a}
            s = c.put_schedule(q, a["name"], a.get("payload"), **spec)
            return {"name": s["name"]}
        if op == "list_schedules":
            return sorted(s["name"] for s in c.schedules(q))
        if op == "delete_schedule":
            try:
                c.delete_schedule(q, a["name"])
                return True
            except NotFound:
                return False
        if op == "stats":
            s = c.stats(q)
            return {"scheduled": s.scheduled, "due": s.due, "leased": s.leased, "dead": s.dead,
                    "paused": s.paused}
        if op == "get_queue":
            s = c.stats(q)
            return {"paused": s.paused, "settings": s.settings}
        if op == "put_queue":
            c.configure(q, **a["settings"])
            return None
        if op == "pause":
            c.pause(q)
            return None
        if op == "resume":
            c.resume(q)
            return None
        if op == "pause_key":
            until = c.pause_key(q, a["key"], for_ms=a.get("for_ms"))
            return {"key": a["key"], "paused": until is not None}
        if op == "resume_key":
            c.resume_key(q, a["key"])
            return {"key": a["key"], "paused": False}
        if op in ("create_batch", "add_to_batch", "close_batch", "batch"):
            return self.batch_step(op, a)
        if op == "create_flow":
            jobs = [dict(j, queue=j.get("queue", q), payload=j.get("payload", {}))
                    for j in a["jobs"]]
            return [{"id": e["id"], "created": e["created"]} for e in c.create_flow(jobs)]
        if op == "key_jobs":
            jobs = list(c.iter_key_jobs(q, a["key"], a.get("state"),
                                        page_size=a.get("page_size", 100)))
            return {"count": len(jobs), "ids": [j.id for j in jobs],
                    "states": [j.state for j in jobs]}
        if op == "cancel_key":
            return c.cancel_key(q, a["key"], running=a.get("running", False))
        if op == "reschedule_key":
            return c.reschedule_key(q, a["key"], shift_ms=a.get("shift_ms"),
                                    due_at=a.get("due_at"))
        if op == "keys":
            return [{"key": k.key, "in_flight": k.in_flight, "due": k.due,
                     "paused": k.paused_until is not None} for k in c.keys(q)]
        raise AssertionError(f"unknown operation {op}")

    def batch_step(self, op, a):
        c, q = self.c, self.q
        view = lambda b: {"id": b.id, "state": b.state, "total": b.total,  # noqa: E731
                          "pending": b.pending, "succeeded": b.succeeded, "dead": b.dead,
                          "cancelled": b.cancelled}
        jobs = [dict(j) for j in a.get("jobs", [])]
        if op == "create_batch":
            cb = lambda v: None if v is None else {"queue": q, "payload": v.get("payload", {})}  # noqa: E731
            return view(c.create_batch(q, jobs, id=a.get("id"), on_complete=cb(a.get("on_complete")),
                                       on_success=cb(a.get("on_success")), open=a.get("open", False),
                                       include_results=a.get("include_results", False)))
        if op == "add_to_batch":
            return view(c.add_to_batch(q, a["id"], jobs, close=a.get("close", False)))
        if op == "close_batch":
            return view(c.close_batch(q, a["id"]))
        until = time.monotonic() + 10
        while True:
            b = c.batch(q, a["id"])
            if not a.get("wait") or b.state == "done" or time.monotonic() > until:
                return view(b)
            time.sleep(0.05)

    def fail(self, e):
        raise e


@needs_server
class Awaited:
    """An ``AsyncClient`` whose every call is awaited on one event loop, so the scenarios run
    on it step by step as on ``Client`` (an async generator is read whole)."""

    def __init__(self, url):
        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(self._open(url))

    @staticmethod
    async def _open(url):
        return AsyncClient(url)

    def close(self):
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()

    def __getattr__(self, name):
        method = getattr(self.client, name)

        def call(*args, **kwargs):
            out = method(*args, **kwargs)
            if inspect.isasyncgen(out):
                async def read():
                    return [x async for x in out]
                return iter(self.loop.run_until_complete(read()))
            return self.loop.run_until_complete(out)

        return call


class Conformance(unittest.TestCase):
    def test_every_scenario(self):
        self.run_scenarios(Client(URL), "Client")

    def test_every_scenario_on_the_async_client(self):
        client = Awaited(URL)
        try:
            self.run_scenarios(client, "AsyncClient")
        finally:
            client.close()

    def run_scenarios(self, client, which):
        for sc in load("scenarios.json")["scenarios"]:
            with self.subTest(client=which, scenario=sc["name"]):
                r = Runner(client)
                for i, st in enumerate(sc["steps"]):
                    where = f"{sc['name']}, step {i + 1} ({st['do']})"
                    try:
                        got = r.step(st["do"], st.get("args", {}))
                    except DelayqError as e:
                        self.assertEqual(st.get("error"), e.code, f"{where}: {e}")
                        continue
                    self.assertNotIn("error", st, f"{where}: succeeded with {got!r}")
                    if "expect" in st:
                        self.assertTrue(matches(st["expect"], got),
                                        f"{where}: expected {st['expect']!r}, got {got!r}")


class Webhooks(unittest.TestCase):
    def test_every_vector(self):
        for v in load("webhooks.json")["vectors"]:
            with self.subTest(vector=v["name"]):
                try:
                    got = verify_webhook(v["secrets"], v["headers"], v["body"].encode(),
                                         now=v["now"])
                    ok = True
                except WebhookVerificationError:
                    ok = False
                self.assertEqual(ok, v["valid"])
                if ok:
                    h = {k.lower(): x for k, x in v["headers"].items()}
                    self.assertEqual((got.id, got.timestamp, got.payload),
                                     (h["webhook-id"], int(h["webhook-timestamp"]),
                                      json.loads(v["body"])))
