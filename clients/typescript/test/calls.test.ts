// Per-call options and typed payloads, against a live server (DELAYQ_URL).

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { Client, DelayqError } from "../src/index.js";

const URL_ = process.env.DELAYQ_URL;
const queue = () => "c-" + randomUUID().slice(0, 10);

interface Order {
  order: number;
}

test("client.with: an AbortSignal and a timeout on every call; get<Order> types the payload", { skip: !URL_ }, async () => {
  const client = new Client({ baseUrl: URL_! });
  const q = queue();
  await client.enqueue(q, { order: 42 }, { id: "o-42", delayMs: 60_000 });
  const job = await client.get<Order>(q, "o-42");
  const n: number | undefined = job?.payload.order; // typed: no cast
  assert.equal(n, 42);

  // An aborted signal: the call fails at once with the code `aborted`, nothing sent again.
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(client.with({ signal: ac.signal }).stats(q), (e: unknown) => {
    assert.ok(e instanceof DelayqError);
    assert.equal((e as DelayqError).code, "aborted");
    return true;
  });
  // A signal that fires during a long poll ends it.
  const cut = new AbortController();
  const started = Date.now();
  setTimeout(() => cut.abort(), 200);
  await assert.rejects(client.with({ signal: cut.signal }).claim(q, { waitMs: 30_000 }), (e: unknown) => {
    assert.equal((e as DelayqError).code, "aborted");
    return true;
  });
  assert.ok(Date.now() - started < 10_000, "the poll ended with its signal");
  // The scoped client's calls still work, and the original is untouched.
  assert.equal((await client.with({ timeoutMs: 5_000 }).stats(q)).scheduled, 1);
  assert.equal((await client.stats(q)).scheduled, 1);
});
