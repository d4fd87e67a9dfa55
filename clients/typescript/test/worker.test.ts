// The Worker under faults, against live servers: a server restarted mid-run (this test starts
// its own with DELAYQ_BIN), a worker closed mid-job, a handler that runs past its lease, and a
// job past its timeout_ms.

import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { Client, DeadLetter, RetryIn, Worker } from "../src/index.js";

const URL_ = process.env.DELAYQ_URL;
const BIN = process.env.DELAYQ_BIN;
const queue = () => "w-" + randomUUID().slice(0, 10);

async function until(what: string, pred: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** `delayq serve` on the embedded store in `dir`; resolves with it and its address. */
function serve(dir: string, listen = "127.0.0.1:0"): Promise<{ proc: ChildProcess; addr: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(BIN!, ["--data", dir, "serve", "--listen", listen], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    proc.stdout!.on("data", (d) => {
      out += d;
      const m = /http:\/\/([0-9.]+:\d+)/.exec(out);
      if (m) resolve({ proc, addr: m[1] });
    });
    proc.on("exit", (code) => reject(new Error(`delayq serve exited (${code}): ${out}`)));
  });
}

test("a worker carries on across a server restart and loses nothing", { skip: !BIN && "DELAYQ_BIN is not set" }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "delayq-ts-"));
  let { proc, addr } = await serve(dir);
  try {
    const client = new Client({ baseUrl: `http://${addr}`, retries: 0 });
    const q = queue();
    for (let n = 0; n < 20; n++) await client.enqueue(q, { n }, { id: `now-${n}` });
    for (let n = 0; n < 20; n++) await client.enqueue(q, { n }, { id: `later-${n}`, delayMs: 1500 });
    const seen = new Set<string>();
    const worker = new Worker(client, q, async (job) => void seen.add(job.id), {
      concurrency: 4,
      waitMs: 500,
      onError: () => undefined,
    });
    const running = worker.run();
    await until("the due jobs", () => seen.size >= 20);
    proc.kill("SIGKILL");
    await new Promise((r) => proc.once("exit", r));
    await sleep(300); // real time: the worker meets a dead server and keeps trying
    ({ proc } = await serve(dir, addr));
    await until("every job after the restart", () => seen.size === 40);
    await worker.close();
    await running;
    const s = await client.stats(q);
    assert.deepEqual([s.scheduled, s.leased, s.dead], [0, 0, 0]);
  } finally {
    // The server and its data directory go with the test, whatever it found.
    if (proc.exitCode === null && proc.signalCode === null) {
      const gone = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGKILL");
      await gone;
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a worker closed mid-job finishes it and acks it", { skip: !URL_ && "DELAYQ_URL is not set" }, async () => {
  const client = new Client({ baseUrl: URL_! });
  const q = queue();
  await client.enqueue(q, "slow", { id: "slow" });
  let started = false;
  let finished = false;
  const worker = new Worker(client, q, async () => {
    started = true;
    await sleep(300);
    finished = true;
  });
  const running = worker.run();
  await until("the handler", () => started);
  await worker.close();
  await running;
  assert.ok(finished, "close() waited for the running handler");
  assert.equal(await client.get(q, "slow"), null, "acked, not left leased");
});

test("a worker over several queues serves them in order; a claim over several shares by weight", { skip: !URL_ && "DELAYQ_URL is not set" }, async () => {
  const client = new Client({ baseUrl: URL_! });
  const [first, second] = [queue(), queue()];
  for (const q of [first, second]) {
    await client.enqueueBatch(q, Array.from({ length: 20 }, (_, n) => ({ payload: n, id: `j${n}` })));
  }
  const seen: string[] = [];
  const worker = new Worker(client, [first, second], async (job) => void seen.push(job.queue), { concurrency: 1, strict: true, waitMs: 200 });
  const running = worker.run();
  await until("all 40 jobs", () => seen.length >= 40);
  await worker.close();
  await running;
  assert.deepEqual(seen, [...Array(20).fill(first), ...Array(20).fill(second)], "strict: the first queue first");
  assert.equal(await client.get(first, "j0"), null, "acked in its own queue");
  assert.equal(await client.get(second, "j0"), null, "acked in its own queue");
  const [heavy, light] = [queue(), queue()];
  for (const q of [heavy, light]) {
    await client.enqueueBatch(q, Array.from({ length: 400 }, (_, n) => ({ payload: n, id: `j${n}` })));
  }
  let fromHeavy = 0;
  for (let n = 0; n < 400; n++) {
    const r = await client.claimMany([{ name: heavy, weight: 3 }, light]);
    if (r.jobs[0].queue === heavy) fromHeavy++;
  }
  assert.ok(fromHeavy >= 255 && fromHeavy <= 345, `${fromHeavy} of 400 from the weight-3 queue`);
});

test("a handler past its lease keeps its job: the lease is extended", { skip: !URL_ && "DELAYQ_URL is not set" }, async () => {
  const client = new Client({ baseUrl: URL_! });
  const q = queue();
  await client.enqueue(q, "long", { id: "long" });
  let runs = 0;
  const worker = new Worker(
    client,
    q,
    async () => {
      runs++;
      await sleep(2500); // real time: over two lease lengths
    },
    { leaseMs: 1000, concurrency: 2 },
  );
  const running = worker.run();
  await until("the handler", () => runs === 1);
  await sleep(1500);
  const other = await client.claim(q, { max: 5 });
  assert.equal(other.jobs.length, 0, "no other consumer got the job while it ran");
  await until("the ack", async () => (await client.get(q, "long")) === null);
  await worker.close();
  await running;
  assert.equal(runs, 1);
});

test("a job past its timeout_ms is given up; RetryIn and DeadLetter choose what follows", { skip: !URL_ && "DELAYQ_URL is not set" }, async () => {
  const client = new Client({ baseUrl: URL_! });
  const q = queue();
  await client.enqueue(q, "hang", { id: "hang", timeoutMs: 200, maxAttempts: 1 });
  await client.enqueue(q, "again", { id: "again", maxAttempts: 3 });
  await client.enqueue(q, "poison", { id: "poison", maxAttempts: 5 });
  const worker = new Worker(
    client,
    q,
    async (job) => {
      if (job.id === "hang") await new Promise(() => undefined); // never settles
      if (job.id === "again" && job.attempt === 1) throw new RetryIn(50, "busy");
      if (job.id === "poison") throw new DeadLetter("cannot parse");
    },
    { concurrency: 4, waitMs: 200 },
  );
  const running = worker.run();
  await until("the timeout", async () => (await client.get(q, "hang"))?.state === "dead");
  assert.equal((await client.get(q, "hang"))?.lastError, "timeout");
  await until("the retried job", async () => (await client.get(q, "again")) === null);
  const poison = await client.get(q, "poison");
  assert.equal(poison?.state, "dead");
  assert.equal(poison?.attempt, 1, "dead-lettered at once");
  await worker.close();
  await running;
});

test("enqueues carry the active trace context and handlers see it", { skip: !URL_ && "DELAYQ_URL is not set" }, async () => {
  const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  // What OpenTelemetry's propagator writes while a span is active.
  const traced = new Client({
    baseUrl: URL_!,
    propagate: (h) => {
      h.traceparent = tp;
      h.tracestate = "congo=t61rcWkgMzE";
    },
  });
  const plain = new Client({ baseUrl: URL_! });
  const q = queue();
  await traced.enqueue(q, 1, { id: "traced" });
  await plain.enqueue(q, 2, { id: "plain" });
  const own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  await plain.enqueue(q, 3, { id: "own", traceparent: own });
  assert.equal((await plain.get(q, "traced"))?.traceparent, tp);
  assert.equal((await plain.get(q, "traced"))?.tracestate, "congo=t61rcWkgMzE");
  assert.equal((await plain.get(q, "plain"))?.traceparent, undefined);
  const seen = new Map<string, string | undefined>();
  const w = new Worker(plain, q, (job) => {
    seen.set(job.id, job.traceparent);
  });
  const running = w.run();
  await until("three jobs handled", () => seen.size === 3);
  await w.close();
  await running;
  assert.equal(seen.get("traced"), tp);
  assert.equal(seen.get("own"), own);
  assert.equal(seen.get("plain"), undefined);
});

test("a handler's return value is the job's result; one over the limit dead-letters it", { skip: !URL_ && "DELAYQ_URL is not set" }, async () => {
  const client = new Client({ baseUrl: URL_! });
  const q = queue();
  await client.putQueue(q, { keep_done_ms: 600_000 });
  await client.enqueue(q, { to: "a@example.com" }, { id: "mail" });
  await client.enqueue(q, {}, { id: "bytes" });
  await client.enqueue(q, {}, { id: "nothing" });
  await client.enqueue(q, {}, { id: "huge" });
  const worker = new Worker(client, q, async (job) => {
    if (job.id === "mail") return { sent: true, to: (job.payload as { to: string }).to };
    if (job.id === "bytes") return new Uint8Array([0, 255, 7]);
    if (job.id === "huge") return "x".repeat(70_000);
    return undefined;
  }, { waitMs: 200 });
  const running = worker.run();
  await until("every job settled", async () => {
    const s = await client.stats(q);
    return s.done + s.dead === 4;
  });
  await worker.close();
  await running;
  assert.deepEqual((await client.get(q, "mail"))?.result, { sent: true, to: "a@example.com" });
  assert.deepEqual((await client.get(q, "bytes"))?.result, new Uint8Array([0, 255, 7]));
  const nothing = await client.get(q, "nothing");
  assert.equal(nothing?.state, "done");
  assert.equal(nothing?.result, undefined);
  const huge = await client.get(q, "huge");
  assert.equal(huge?.state, "dead");
  assert.match(huge?.lastError ?? "", /over the limit of 65535 bytes/);
});
