// The shared conformance suite (clients/conformance) run by the TypeScript client: every
// scenario against the live server at DELAYQ_URL, and every webhook vector.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Client, DelayqError, verifyWebhook } from "../src/index.js";

// clients/conformance beside the package, or DELAYQ_CONFORMANCE (the package installed from
// its tarball, away from the repository).
const SUITE = process.env.DELAYQ_CONFORMANCE
  ? new URL(`file://${process.env.DELAYQ_CONFORMANCE.replace(/\/?$/, "/")}`)
  : new URL("../../../conformance/", import.meta.url);
const load = (name: string) => JSON.parse(readFileSync(new URL(name, SUITE), "utf8"));
const URL_ = process.env.DELAYQ_URL;

type J = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Deep subset match (clients/conformance/README.md). */
function matches(expect: J, got: J): boolean {
  if (expect !== null && typeof expect === "object" && !Array.isArray(expect)) {
    return got !== null && typeof got === "object" && Object.entries(expect).every(([k, v]) => k in got && matches(v, got[k]));
  }
  if (Array.isArray(expect)) {
    return Array.isArray(got) && got.length === expect.length && expect.every((e, i) => matches(e, got[i]));
  }
  return expect === got;
}

const listed = (ids: string[]) => ({ count: ids.length, ids: [...ids].sort() });

function opts(a: J) {
  return {
    id: a.id,
    delayMs: a.delay_ms,
    runAt: a.run_at,
    maxAttempts: a.max_attempts,
    priority: a.priority,
    key: a.key,
    onConflict: a.on_conflict,
    target: a.target,
    dependsOn: a.depends_on,
    onDependencyFailure: a.on_dependency_failure,
    includeDependencyResults: a.include_dependency_results,
  };
}

class Runner {
  readonly q = "conf-" + randomUUID().slice(0, 10);
  readonly leases = new Map<string, number>();
  constructor(readonly c: Client) {}

  token(a: J): number {
    if (a.lease_token !== undefined) return a.lease_token;
    const t = this.leases.get(a.id)!;
    return a.lease === "stale" ? t + 1_000_000 : t;
  }

  async step(op: string, a: J): Promise<J> {
    const { c, q } = this;
    switch (op) {
      case "enqueue": {
        const e = await c.enqueue(q, a.payload, opts(a));
        return { id: e.id, created: e.created };
      }
      case "enqueue_batch":
        return (await c.enqueueBatch(q, a.jobs.map((j: J) => ({ payload: j.payload, ...opts(j) })))).map((e) => ({
          id: e.id,
          created: e.created,
        }));
      case "get": {
        const j = await c.get(q, a.id);
        if (!j) return null;
        const out: J = { id: j.id, state: j.state, attempt: j.attempt, max_attempts: j.maxAttempts, payload: j.payload };
        if (j.lastError !== undefined) out.last_error = j.lastError;
        out.result = j.result === undefined ? null : j.result;
        if (j.key !== undefined) out.key = j.key;
        return out;
      }
      case "cancel":
        return c.cancel(q, a.id, { running: a.running === true });
      case "reschedule":
        await c.reschedule(q, a.id, { delayMs: a.delay_ms, runAt: a.run_at });
        return null;
      case "claim": {
        const r = await c.claim(q, { max: a.max, leaseMs: a.lease_ms });
        for (const j of r.jobs) this.leases.set(j.id, j.leaseToken);
        const jobs = [...r.jobs].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
        return { ...listed(jobs.map((j) => j.id)), keys: jobs.map((j) => j.key ?? null) };
      }
      case "ack":
        await c.ack(q, a.id, this.token(a), { result: a.result_repeat ? String(a.result).repeat(a.result_repeat) : a.result });
        return "acked";
      case "nack":
        return c.nack(q, a.id, this.token(a), { error: a.error, retryInMs: a.retry_in_ms, dead: a.dead });
      case "extend":
        await c.extend(q, a.id, this.token(a), a.lease_ms ?? 30_000);
        return "extended";
      case "release":
        await c.release(q, a.id, this.token(a));
        return null;
      case "list": {
        const ids: string[] = [];
        for await (const j of c.listJobs(q, { state: a.state, pageSize: a.page_size })) ids.push(j.id);
        return listed(ids);
      }
      case "list_dead":
        return listed((await c.listDead(q)).map((j) => j.id));
      case "requeue_dead":
        return c.requeueDead(q, a.id);
      case "purge_dead":
        return c.purgeDead(q);
      case "put_schedule": {
        const s = await c.putSchedule(q, a.name, { cron: a.cron, tz: a.tz, everyMs: a.every_ms, payload: a.payload });
        return { name: s.name };
      }
      case "list_schedules":
        return (await c.listSchedules(q)).map((s) => s.name).sort();
      case "delete_schedule":
        return c.deleteSchedule(q, a.name);
      case "stats": {
        const s = await c.stats(q);
        return { scheduled: s.scheduled, due: s.due, leased: s.leased, dead: s.dead, paused: s.paused };
      }
      case "get_queue": {
        const s = await c.getQueue(q);
        return { paused: s.paused, settings: s.settings };
      }
      case "put_queue":
        await c.putQueue(q, a.settings);
        return null;
      case "pause":
        await c.pause(q);
        return null;
      case "resume":
        await c.resume(q);
        return null;
      case "pause_key": {
        const h = await c.pauseKey(q, a.key, { forMs: a.for_ms });
        return { key: h.key, paused: h.pausedUntil !== undefined };
      }
      case "resume_key": {
        const h = await c.resumeKey(q, a.key);
        return { key: h.key, paused: h.pausedUntil !== undefined };
      }
      case "create_batch": {
        const cb = (v: J | undefined) => (v ? { queue: q, payload: v.payload ?? {} } : undefined);
        const jobs = (a.jobs ?? []).map((j: J) => ({ payload: j.payload, ...opts(j) }));
        const b = await c.createBatch(q, jobs, {
          id: a.id,
          onComplete: cb(a.on_complete),
          onSuccess: cb(a.on_success),
          open: a.open,
          includeResults: a.include_results,
        });
        return batchView(b);
      }
      case "add_to_batch": {
        const jobs = (a.jobs ?? []).map((j: J) => ({ payload: j.payload, ...opts(j) }));
        return batchView(await c.addToBatch(q, a.id, jobs, { close: a.close }));
      }
      case "close_batch":
        return batchView(await c.closeBatch(q, a.id));
      case "batch": {
        const until = Date.now() + 10_000;
        for (;;) {
          const b = await c.batch(q, a.id);
          if (!a.wait || b.state === "done" || Date.now() > until) return batchView(b);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      case "create_flow": {
        const jobs = (a.jobs as J[]).map((j) => ({ queue: j.queue ?? q, payload: j.payload ?? {}, ...opts(j), id: j.id }));
        return (await c.createFlow(jobs)).map((e) => ({ id: e.id, created: e.created }));
      }
      case "key_jobs": {
        const ids: string[] = [];
        const states: string[] = [];
        for await (const j of c.keyJobs(q, a.key, { state: a.state, pageSize: a.page_size })) {
          ids.push(j.id);
          states.push(j.state);
        }
        return { count: ids.length, ids, states };
      }
      case "cancel_key":
        return await c.cancelKey(q, a.key, { running: a.running });
      case "reschedule_key":
        return await c.rescheduleKey(q, a.key, { shiftMs: a.shift_ms, dueAt: a.due_at });
      case "keys":
        return (await c.keys(q)).map((k) => ({ key: k.key, in_flight: k.inFlight, due: k.due, paused: k.pausedUntil !== undefined }));
      default:
        throw new Error(`unknown operation ${op}`);
    }
  }
}

test("every scenario", { skip: !URL_ && "DELAYQ_URL is not set (run through cargo test)" }, async (t) => {
  const client = new Client({ baseUrl: URL_! });
  for (const sc of load("scenarios.json").scenarios) {
    await t.test(sc.name, async () => {
      const r = new Runner(client);
      for (const [i, st] of sc.steps.entries()) {
        const where = `${sc.name}, step ${i + 1} (${st.do})`;
        let got: J;
        try {
          got = await r.step(st.do, st.args ?? {});
        } catch (e) {
          if (!(e instanceof DelayqError)) throw e;
          assert.equal(e.code, st.error, `${where}: ${e.message}`);
          continue;
        }
        assert.equal(st.error, undefined, `${where}: succeeded with ${JSON.stringify(got)}`);
        if ("expect" in st) {
          assert.ok(matches(st.expect, got), `${where}: expected ${JSON.stringify(st.expect)}, got ${JSON.stringify(got)}`);
        }
      }
    });
  }
});

test("every webhook vector", () => {
  for (const v of load("webhooks.json").vectors) {
    let ok = true;
    try {
      const msg = verifyWebhook(v.secrets, v.headers, v.body, { now: v.now });
      const h = Object.fromEntries(Object.entries(v.headers as Record<string, string>).map(([k, x]) => [k.toLowerCase(), x]));
      assert.deepEqual(msg, { id: h["webhook-id"], timestamp: Number(h["webhook-timestamp"]), payload: JSON.parse(v.body) }, v.name);
    } catch (e) {
      if (!(e instanceof DelayqError)) throw e;
      assert.equal(e.code, "invalid_signature");
      ok = false;
    }
    assert.equal(ok, v.valid, v.name);
  }
});

function batchView(b: { id: string; state: string; total: number; pending: number; succeeded: number; dead: number; cancelled: number }) {
  return { id: b.id, state: b.state, total: b.total, pending: b.pending, succeeded: b.succeeded, dead: b.dead, cancelled: b.cancelled };
}
