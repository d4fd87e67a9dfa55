// Client: one method per /v1 operation of a delayq server, over Node's global fetch
// (keep-alive). Calls that are safe to repeat are retried when no answer comes or the server
// is unavailable; an enqueue is one of them because every job gets its id here, before the
// first try.

import { randomUUID } from "node:crypto";

import { DelayqError } from "./errors.js";
import type {
  Batch,
  BatchCallback,
  BatchJob,
  CreateBatchOptions,
  ClaimedJob,
  Claimed,
  EnqueueOptions,
  Enqueued,
  JobInfo,
  KeyHold,
  KeyStats,
  QueueChoice,
  QueueInfo,
  QueueSettings,
  QueueStats,
  Schedule,
  ScheduleSpec,
  SettingsPatch,
} from "./types.js";

/** How to reach the server. */
export interface ClientOptions {
  /** `http://127.0.0.1:7070` */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Longest one request may take, ms (default 30,000; a claim's wait comes on top). */
  timeoutMs?: number;
  /** Times a call that is safe to repeat is sent again (default 3). */
  retries?: number;
  /**
   * Writes the active trace context into a request's headers (`traceparent`, `tracestate`),
   * so enqueued jobs carry it. Default: OpenTelemetry's propagator when `@opentelemetry/api`
   * is installed, else nothing.
   */
  propagate?: (headers: Record<string, string>) => void;
  /** Aborts every call of this client when it fires (see `Client.with`). */
  signal?: AbortSignal;
}

/** What one call, or one scope of calls, may set: an `AbortSignal` and a timeout. */
export interface CallOptions {
  /** Aborts the call (it fails with the code `aborted`). */
  signal?: AbortSignal;
  /** Longest one request may take, ms (a claim's wait comes on top). */
  timeoutMs?: number;
}

/** `@opentelemetry/api` when the application has it (an optional peer: never required). */
let otel: Promise<{ propagation: any; context: any } | null> | undefined;
const otelName = "@opentelemetry/api";

async function otelPropagate(headers: Record<string, string>): Promise<void> {
  otel ??= import(otelName).catch(() => null);
  const api = await otel;
  if (!api) return;
  try {
    api.propagation.inject(api.context.active(), headers);
  } catch {
    // Tracing must never fail a call.
  }
}

/** An ack a claim may carry. */
export interface Ack {
  id: string;
  leaseToken: number;
  /** The handler's result, kept with the done job (see `ack`). */
  result?: unknown;
}

type Json = Record<string, unknown>;

const date = (ms: unknown): Date => new Date(Number(ms));
const optDate = (ms: unknown): Date | undefined => (ms == null ? undefined : date(ms));

function enc(s: string): string {
  return encodeURIComponent(s);
}

function timeOf(v: Date | number | string): number | string {
  return v instanceof Date ? v.getTime() : v;
}

/** A payload out of an answer: its JSON value, or the bytes when it was not JSON. */
function payloadOf(j: Json): unknown {
  if (typeof j.payload_b64 === "string") return new Uint8Array(Buffer.from(j.payload_b64, "base64"));
  return j.payload;
}

/** A done job's result out of an answer (`undefined` when it has none). */
function resultOf(j: Json): unknown {
  if (typeof j.result_b64 === "string") return new Uint8Array(Buffer.from(j.result_b64, "base64"));
  return j.result;
}

/** An ack's result fields (none for `undefined`). */
function resultFields(result: unknown): Json {
  if (result === undefined) return {};
  if (result instanceof Uint8Array) return { result_b64: Buffer.from(result).toString("base64") };
  return { result };
}

function payloadFields(payload: unknown): Json {
  if (payload instanceof Uint8Array) return { payload_b64: Buffer.from(payload).toString("base64") };
  return { payload: payload === undefined ? null : payload };
}

/** FNV-1a (64-bit) of `text`'s UTF-8 bytes, as 16 hex digits. */
function fnv1a64(text: string): string {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(text, "utf8")) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, "0");
}

/**
 * A fresh id for a job: one for a job with a key ends with `~k` and the key's hash, so a
 * sharded Redis store keeps the key's jobs in the key's shard (as the server's own ids).
 */
function newId(key: string | undefined): string {
  return key ? `${randomUUID()}~k${fnv1a64(key)}` : randomUUID();
}

function jobBody(payload: unknown, o: EnqueueOptions): Json {
  const b: Json = { id: o.id ?? newId(o.key), ...payloadFields(payload) };
  if (o.delayMs !== undefined) b.delay_ms = o.delayMs;
  if (o.runAt !== undefined) b.run_at = timeOf(o.runAt);
  if (o.maxAttempts !== undefined) b.max_attempts = o.maxAttempts;
  if (o.priority !== undefined) b.priority = o.priority;
  if (o.key !== undefined) b.key = o.key;
  if (o.target !== undefined) b.target = o.target;
  if (o.onConflict !== undefined) b.on_conflict = o.onConflict;
  if (o.backoff !== undefined) b.backoff = o.backoff;
  if (o.leaseMs !== undefined) b.lease_ms = o.leaseMs;
  if (o.timeoutMs !== undefined) b.timeout_ms = o.timeoutMs;
  if (o.expiresAt !== undefined) b.expires_at = timeOf(o.expiresAt);
  if (o.keepDoneMs !== undefined) b.keep_done_ms = o.keepDoneMs;
  if (o.dedupeMs !== undefined) b.dedupe_ms = o.dedupeMs;
  if (o.traceparent !== undefined) b.traceparent = o.traceparent;
  if (o.tracestate !== undefined) b.tracestate = o.tracestate;
  return b;
}

function callbackBody(c: BatchCallback): Json {
  const b: Json = { queue: c.queue, payload: c.payload ?? {} };
  if (c.delayMs !== undefined) b.delay_ms = c.delayMs;
  return b;
}

function batchOf(b: Json): Batch {
  return {
    id: String(b.id),
    queue: String(b.queue),
    state: b.state as Batch["state"],
    total: Number(b.total),
    pending: Number(b.pending),
    succeeded: Number(b.succeeded),
    dead: Number(b.dead),
    cancelled: Number(b.cancelled),
    createdAt: new Date(Number(b.created_at_ms)),
    doneAt: b.done_at_ms === undefined || b.done_at_ms === null ? undefined : new Date(Number(b.done_at_ms)),
    callbackError: b.callback_error === undefined ? undefined : String(b.callback_error),
    callbackAttempts: b.callback_attempts === undefined ? undefined : Number(b.callback_attempts),
    callbackNextTryAt:
      b.callback_next_try_at_ms === undefined ? undefined : new Date(Number(b.callback_next_try_at_ms)),
  };
}

function enqueued(e: Json): Enqueued {
  return {
    id: String(e.id),
    dueAt: date(e.due_at),
    created: Boolean(e.created),
    replaced: Boolean(e.replaced),
    state: e.state as string | undefined,
  };
}

function jobInfo(j: Json): JobInfo {
  return {
    id: String(j.id),
    state: String(j.state),
    attempt: Number(j.attempt),
    maxAttempts: Number(j.max_attempts),
    dueAt: date(j.due_at),
    createdAt: date(j.created_at),
    payload: payloadOf(j),
    priority: Number(j.priority ?? 5),
    leaseDeadline: optDate(j.lease_deadline),
    failedAt: optDate(j.failed_at),
    completedAt: optDate(j.completed_at),
    lastError: j.last_error as string | undefined,
    result: resultOf(j),
    timeoutMs: j.timeout_ms as number | undefined,
    expiresAt: optDate(j.expires_at),
    target: j.target as JobInfo["target"],
    traceparent: j.traceparent as string | undefined,
    tracestate: j.tracestate as string | undefined,
    key: j.key as string | undefined,
  };
}

function claimedJob(j: Json): ClaimedJob {
  return {
    id: String(j.id),
    leaseToken: Number(j.lease_token),
    attempt: Number(j.attempt),
    maxAttempts: Number(j.max_attempts),
    dueAt: date(j.due_at),
    createdAt: date(j.created_at),
    leaseDeadline: date(j.lease_deadline),
    payload: payloadOf(j),
    priority: Number(j.priority ?? 5),
    lastError: j.last_error as string | undefined,
    timeoutMs: j.timeout_ms as number | undefined,
    traceparent: j.traceparent as string | undefined,
    tracestate: j.tracestate as string | undefined,
    queue: j.queue as string | undefined,
    key: j.key as string | undefined,
  };
}

function keyHold(v: Json): KeyHold {
  return { queue: String(v.queue), key: String(v.key), pausedUntil: optDate(v.paused_until) };
}

/** A claim's answer (one queue's or several's). */
function claimed(r: Json): Claimed {
  return {
    jobs: (r.jobs as Json[]).map(claimedJob),
    acks: (r.acks as string[] | undefined) ?? [],
    nextDueInMs: r.next_due_in_ms as number | undefined,
  };
}

function queueInfo(q: Json): QueueInfo {
  const s: QueueStats = {
    queue: String(q.queue),
    scheduled: Number(q.scheduled),
    due: Number(q.due),
    dueNextMinute: Number(q.due_next_minute),
    leased: Number(q.leased),
    dead: Number(q.dead),
    oldestOverdueMs: Number(q.oldest_overdue_ms),
    paused: Boolean(q.paused),
    waitingOnLimit: Number(q.waiting_on_limit ?? 0),
    done: Number(q.done ?? 0),
  };
  return q.settings ? { ...s, settings: q.settings as QueueSettings } : s;
}

function schedule(s: Json): Schedule {
  return {
    name: String(s.name),
    cron: s.cron as string | undefined,
    tz: s.tz as string | undefined,
    everyMs: s.every_ms as number | undefined,
    catchUp: String(s.catch_up),
    nextFire: date(s.next_fire),
    payload: payloadOf(s),
    maxAttempts: s.max_attempts as number | undefined,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A signal aborted when either is (AbortSignal.any needs Node 20.3). */
function anySignal(a: AbortSignal, b: AbortSignal): AbortSignal {
  const c = new AbortController();
  for (const s of [a, b]) {
    if (s.aborted) c.abort(s.reason);
    else s.addEventListener("abort", () => c.abort(s.reason), { once: true });
  }
  return c.signal;
}

/** A client of one delayq server. */
export class Client {
  readonly baseUrl: string;
  readonly #token?: string;
  readonly #propagate?: (headers: Record<string, string>) => void;
  readonly #timeoutMs: number;
  readonly #retries: number;
  readonly #signal?: AbortSignal;
  readonly #opts: ClientOptions;

  constructor(opts: ClientOptions) {
    if (!/^https?:\/\//.test(opts.baseUrl)) {
      throw new DelayqError("invalid_argument", `baseUrl ${JSON.stringify(opts.baseUrl)}: expected http://HOST:PORT`, {
        retryable: false,
      });
    }
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.#token = opts.token;
    this.#propagate = opts.propagate;
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.#retries = opts.retries ?? 3;
    this.#signal = opts.signal;
    this.#opts = opts;
  }

  /**
   * This client with `call`'s signal and timeout on every call made through it:
   * `await client.with({ signal: ac.signal, timeoutMs: 2_000 }).get<Order>("orders", id)`.
   * (A signal given to a call that takes one, such as `claim`, applies as well.)
   */
  with(call: CallOptions): Client {
    const signal = call.signal && this.#signal ? anySignal(call.signal, this.#signal) : (call.signal ?? this.#signal);
    return new Client({ ...this.#opts, timeoutMs: call.timeoutMs ?? this.#timeoutMs, signal });
  }

  /** One request; the JSON of a 2xx (undefined when empty), else a DelayqError. */
  async #once(method: string, path: string, body: unknown, extraMs: number, signal?: AbortSignal): Promise<unknown> {
    const headers: Record<string, string> = {};
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.#propagate) {
      try {
        this.#propagate(headers);
      } catch {
        // Tracing must never fail a call.
      }
    } else {
      await otelPropagate(headers);
    }
    const timeout = AbortSignal.timeout(this.#timeoutMs + extraMs);
    const given = signal && this.#signal ? anySignal(signal, this.#signal) : (signal ?? this.#signal);
    const both = given ? anySignal(timeout, given) : timeout;
    let resp: Response;
    try {
      resp = await fetch(this.baseUrl + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: both,
      });
    } catch (e) {
      if (timeout.aborted) throw new DelayqError("timeout", `${method} ${path}: no answer in time`);
      if (given?.aborted) throw new DelayqError("aborted", `${method} ${path}: aborted`, { retryable: false });
      const cause = (e as { cause?: { message?: string } }).cause?.message ?? String(e);
      throw new DelayqError("connection_failed", `delayq server ${this.baseUrl}: ${cause}`);
    }
    const text = await resp.text();
    let json: unknown = undefined;
    if (text) {
      try {
        json = JSON.parse(text);
      } catch {
        if (resp.ok) throw new DelayqError("bad_answer", `not JSON: ${text.slice(0, 200)}`, { retryable: false });
      }
    }
    if (resp.ok) return json;
    const b = (json ?? {}) as Json;
    const retryAfter = resp.headers.get("retry-after");
    throw new DelayqError(
      typeof b.code === "string" ? b.code : resp.status === 503 ? "unavailable" : `http_${resp.status}`,
      typeof b.message === "string" ? b.message : text.slice(0, 200),
      {
        status: resp.status,
        state: b.state as string | undefined,
        retryAfterS: retryAfter && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined,
      },
    );
  }

  async #call(
    method: string,
    path: string,
    body?: unknown,
    opts: { repeat?: boolean; extraMs?: number; signal?: AbortSignal } = {},
  ): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#once(method, path, body, opts.extraMs ?? 0, opts.signal);
      } catch (e) {
        const err = e as DelayqError;
        if (opts.repeat === false || attempt >= this.#retries || !err.retryable) throw err;
        await sleep(err.retryAfterS !== undefined ? err.retryAfterS * 1000 : 200 * 2 ** attempt);
      }
    }
  }

  static #q(queue: string): string {
    return `/v1/queues/${enc(queue)}`;
  }

  static #job(queue: string, id: string, rest = ""): string {
    return `${Client.#q(queue)}/jobs/${enc(id)}${rest}`;
  }

  // --- Jobs ---------------------------------------------------------------------------

  /** Enqueues one job (payload: any JSON value, or a Uint8Array of bytes). */
  async enqueue(queue: string, payload: unknown, opts: EnqueueOptions = {}): Promise<Enqueued> {
    return enqueued((await this.#call("POST", `${Client.#q(queue)}/jobs`, jobBody(payload, opts))) as Json);
  }

  /** Enqueues a batch atomically (1-10,000 jobs); one answer per job, in order. */
  async enqueueBatch(queue: string, jobs: BatchJob[]): Promise<Enqueued[]> {
    const body = jobs.map(({ payload, ...o }) => jobBody(payload, o));
    const out = (await this.#call("POST", `${Client.#q(queue)}/jobs`, body)) as Json[];
    return out.map(enqueued);
  }

  // --- Batches ---------------------------------------------------------------------------

  /**
   * Creates a batch of jobs: when every one has ended (acked, dead or cancelled) its callbacks
   * are enqueued once. Closed at once unless `open`; an open batch of that id gains the jobs.
   */
  async createBatch(queue: string, jobs: BatchJob[], opts: CreateBatchOptions = {}): Promise<Batch> {
    const body: Json = {
      jobs: jobs.map(({ payload, ...o }) => jobBody(payload, o)),
      open: opts.open ?? false,
      include_results: opts.includeResults ?? false,
    };
    if (opts.id !== undefined) body.id = opts.id;
    if (opts.onComplete) body.on_complete = callbackBody(opts.onComplete);
    if (opts.onSuccess) body.on_success = callbackBody(opts.onSuccess);
    // Sent once: a retry after a call that closed the batch would be refused.
    const r = (await this.#call("POST", `${Client.#q(queue)}/batches`, body, { repeat: false })) as Json;
    return batchOf(r.batch as Json);
  }

  /** Adds jobs to an open batch (a `conflict` error once it is closed), closing it after them with `close`. */
  async addToBatch(queue: string, id: string, jobs: BatchJob[], opts: { close?: boolean } = {}): Promise<Batch> {
    const body = { jobs: jobs.map(({ payload, ...o }) => jobBody(payload, o)), close: opts.close ?? false };
    const path = `${Client.#q(queue)}/batches/${encodeURIComponent(id)}/jobs`;
    return batchOf(((await this.#call("POST", path, body, { repeat: false })) as Json).batch as Json);
  }

  /** Closes a batch: no job joins it any more. */
  async closeBatch(queue: string, id: string): Promise<Batch> {
    return batchOf((await this.#call("POST", `${Client.#q(queue)}/batches/${encodeURIComponent(id)}/close`)) as Json);
  }

  /** One batch: its state and counts (a `not_found` error when there is none). */
  async batch(queue: string, id: string): Promise<Batch> {
    return batchOf((await this.#call("GET", `${Client.#q(queue)}/batches/${encodeURIComponent(id)}`)) as Json);
  }

  /** The batches of a queue not done yet, oldest first. */
  async batches(queue: string, opts: { limit?: number } = {}): Promise<Batch[]> {
    const r = (await this.#call("GET", `${Client.#q(queue)}/batches?limit=${opts.limit ?? 20}`)) as Json;
    return (r.batches as Json[]).map(batchOf);
  }

  /** One job in any state; `null` when there is no such job. */
  async get<P = unknown>(queue: string, id: string): Promise<JobInfo<P> | null> {
    try {
      return jobInfo((await this.#call("GET", Client.#job(queue, id))) as Json) as JobInfo<P>;
    } catch (e) {
      if ((e as DelayqError).code === "not_found") return null;
      throw e;
    }
  }

  /** Cancels a scheduled job: `cancelled`, or why not. */
  async cancel(queue: string, id: string): Promise<"cancelled" | "not_found" | "leased" | "dead"> {
    try {
      await this.#call("DELETE", Client.#job(queue, id));
      return "cancelled";
    } catch (e) {
      const code = (e as DelayqError).code;
      if (code === "not_found") return "not_found";
      if (code === "job_leased") return "leased";
      if (code === "job_dead") return "dead";
      throw e;
    }
  }

  /** Moves a scheduled job to a new due time. */
  async reschedule(queue: string, id: string, to: { delayMs?: number; runAt?: Date | number | string }): Promise<{ dueAt: Date }> {
    const body: Json = {};
    if (to.delayMs !== undefined) body.delay_ms = to.delayMs;
    if (to.runAt !== undefined) body.run_at = timeOf(to.runAt);
    const o = (await this.#call("PATCH", Client.#job(queue, id), body)) as Json;
    return { dueAt: date(o.due_at) };
  }

  /** Makes a scheduled job due now. */
  async runNow(queue: string, id: string): Promise<void> {
    await this.#call("POST", Client.#job(queue, id, "/run"));
  }

  /** Every job in `state` (`scheduled`, `due`, `leased`, `dead`, `done`), page after page. */
  async *listJobs(queue: string, opts: { state: string; pageSize?: number }): AsyncGenerator<JobInfo> {
    let cursor: string | undefined;
    for (;;) {
      const qs = new URLSearchParams({ state: opts.state, limit: String(opts.pageSize ?? 100) });
      if (cursor) qs.set("cursor", cursor);
      const page = (await this.#call("GET", `${Client.#q(queue)}/jobs?${qs}`)) as Json;
      for (const j of page.jobs as Json[]) yield jobInfo(j);
      if (!page.next_cursor) return;
      cursor = String(page.next_cursor);
    }
  }

  // --- Consumers ----------------------------------------------------------------------

  /** Leases due jobs, waiting up to `waitMs` for one; `acks` are applied first. Not retried. */
  async claim(
    queue: string,
    opts: { max?: number; leaseMs?: number; waitMs?: number; acks?: Ack[]; pollId?: string; signal?: AbortSignal } = {},
  ): Promise<Claimed> {
    const body: Json = { max: opts.max ?? 1, wait_ms: opts.waitMs ?? 0 };
    if (opts.leaseMs !== undefined) body.lease_ms = opts.leaseMs;
    if (opts.acks?.length) body.acks = opts.acks.map((a) => ({ id: a.id, lease_token: a.leaseToken, ...resultFields(a.result) }));
    if (opts.pollId) body.poll_id = opts.pollId;
    const r = (await this.#call("POST", `${Client.#q(queue)}/claim`, body, {
      repeat: false,
      extraMs: opts.waitMs ?? 0,
      signal: opts.signal,
    })) as Json;
    return claimed(r);
  }

  /**
   * Leases due jobs from several queues (`POST /v1/claim`): by weight among those with due
   * jobs, or in the order given with `strict`; with `waitMs`, one long poll over all of them
   * (`pollId` names it: `cutPoll` on the first queue ends it).
   * `acks` name their queues. Each job names its `queue`. Not retried.
   */
  async claimMany(
    queues: QueueChoice[],
    opts: { max?: number; leaseMs?: number; waitMs?: number; strict?: boolean; acks?: (Ack & { queue: string })[]; pollId?: string; signal?: AbortSignal } = {},
  ): Promise<Claimed> {
    const body: Json = {
      queues: queues.map((q) => (typeof q === "string" ? { name: q } : q.weight === undefined ? { name: q.name } : { name: q.name, weight: q.weight })),
      max: opts.max ?? 1,
      wait_ms: opts.waitMs ?? 0,
    };
    if (opts.strict) body.strict = true;
    if (opts.leaseMs !== undefined) body.lease_ms = opts.leaseMs;
    if (opts.acks?.length) body.acks = opts.acks.map((a) => ({ queue: a.queue, id: a.id, lease_token: a.leaseToken, ...resultFields(a.result) }));
    if (opts.pollId) body.poll_id = opts.pollId;
    const r = (await this.#call("POST", "/v1/claim", body, { repeat: false, extraMs: opts.waitMs ?? 0, signal: opts.signal })) as Json;
    return claimed(r);
  }

  /** Ends the waiting claim named `pollId` now. */
  async cutPoll(queue: string, pollId: string): Promise<void> {
    await this.#call("DELETE", `${Client.#q(queue)}/polls/${enc(pollId)}`, undefined, { repeat: false });
  }

  /**
   * Completes a job (a `lease_lost` error when its lease moved on). `result` (any JSON value,
   * or bytes as a `Uint8Array`; at most 65,535 bytes) is kept with the job while its queue
   * keeps done jobs (`keep_done_ms`), and `get` answers it.
   */
  async ack(queue: string, id: string, leaseToken: number, opts: { result?: unknown } = {}): Promise<void> {
    await this.#call("POST", Client.#job(queue, id, "/ack"), { lease_token: leaseToken, ...resultFields(opts.result) });
  }

  /** Completes up to 1,000 jobs in one request; per ack `acked`, `lease_lost` or `not_found`. */
  async ackBatch(queue: string, acks: Ack[]): Promise<string[]> {
    const body = { acks: acks.map((a) => ({ id: a.id, lease_token: a.leaseToken, ...resultFields(a.result) })) };
    const r = (await this.#call("POST", `${Client.#q(queue)}/acks`, body)) as Json;
    return r.acks as string[];
  }

  /** Fails an attempt: retried by backoff (or after `retryInMs`), or dead-lettered. */
  async nack(
    queue: string,
    id: string,
    leaseToken: number,
    opts: { error?: string; retryInMs?: number; dead?: boolean } = {},
  ): Promise<"retrying" | "dead"> {
    const body: Json = { lease_token: leaseToken, dead: opts.dead ?? false };
    if (opts.error !== undefined) body.error = opts.error;
    if (opts.retryInMs !== undefined) body.retry_in_ms = opts.retryInMs;
    const r = (await this.#call("POST", Client.#job(queue, id, "/nack"), body, { repeat: false })) as Json;
    return r.outcome as "retrying" | "dead";
  }

  /** Extends a lease to `leaseMs` from now; answers the new deadline. */
  async extend(queue: string, id: string, leaseToken: number, leaseMs: number): Promise<Date> {
    const r = (await this.#call("POST", Client.#job(queue, id, "/extend"), { lease_token: leaseToken, lease_ms: leaseMs })) as Json;
    return date(r.lease_deadline);
  }

  /** Gives a lease back: the job is due again at once (the attempt not counted by default). */
  async release(queue: string, id: string, leaseToken: number, undoAttempt = true): Promise<void> {
    await this.#call("POST", Client.#job(queue, id, "/release"), { lease_token: leaseToken, undo_attempt: undoAttempt });
  }

  // --- Queues -------------------------------------------------------------------------

  /** Every queue that holds jobs, with its counts. */
  async queues(): Promise<QueueStats[]> {
    return ((await this.#call("GET", "/v1/queues")) as Json[]).map(queueInfo);
  }

  /** A queue's counts. */
  async stats(queue: string): Promise<QueueStats> {
    const { settings: _settings, ...s } = await this.getQueue(queue);
    return s;
  }

  /** A queue's counts and settings. */
  async getQueue(queue: string): Promise<QueueInfo> {
    return queueInfo((await this.#call("GET", Client.#q(queue))) as Json);
  }

  /** Changes a queue's settings (the fields given); answers the queue. */
  async putQueue(queue: string, patch: SettingsPatch): Promise<QueueInfo> {
    return queueInfo((await this.#call("PUT", Client.#q(queue), patch)) as Json);
  }

  /** Pauses a queue: it accepts jobs and leases none. */
  async pause(queue: string): Promise<void> {
    await this.#call("POST", `${Client.#q(queue)}/pause`);
  }

  /** Resumes a paused queue. */
  async resume(queue: string): Promise<void> {
    await this.#call("POST", `${Client.#q(queue)}/resume`);
  }

  /**
   * Holds one key's due jobs until `until` or for `forMs` (an upstream's `Retry-After`): the
   * queue's other keys are claimed meanwhile.
   */
  async pauseKey(queue: string, key: string, hold: { forMs?: number; until?: Date | number | string }): Promise<KeyHold> {
    const body: Json = {};
    if (hold.forMs !== undefined) body.for_ms = hold.forMs;
    if (hold.until !== undefined) body.until = timeOf(hold.until);
    return keyHold((await this.#call("POST", `${Client.#q(queue)}/keys/${encodeURIComponent(key)}/pause`, body)) as Json);
  }

  /** Lifts a key's hold: its due jobs are claimed again at once. */
  async resumeKey(queue: string, key: string): Promise<KeyHold> {
    return keyHold((await this.#call("POST", `${Client.#q(queue)}/keys/${encodeURIComponent(key)}/resume`)) as Json);
  }

  /** The busiest keys of a queue: most jobs in flight and due first, then held ones. */
  async keys(queue: string, opts: { limit?: number } = {}): Promise<KeyStats[]> {
    const r = (await this.#call("GET", `${Client.#q(queue)}/keys?limit=${opts.limit ?? 20}`)) as Json;
    return (r.keys as Json[]).map((k) => ({
      key: String(k.key),
      inFlight: Number(k.in_flight),
      due: Number(k.due),
      pausedUntil: optDate(k.paused_until),
    }));
  }

  // --- Dead letters -------------------------------------------------------------------

  /** Dead jobs, oldest failure first. */
  async listDead(queue: string, opts: { offset?: number; limit?: number } = {}): Promise<JobInfo[]> {
    const r = (await this.#call("GET", `${Client.#q(queue)}/dead?offset=${opts.offset ?? 0}&limit=${opts.limit ?? 100}`)) as Json[];
    return r.map(jobInfo);
  }

  /** Puts one dead job (or, without `id`, every one) back, due now; answers how many. */
  async requeueDead(queue: string, id?: string): Promise<number> {
    if (id !== undefined) {
      await this.#call("POST", `${Client.#q(queue)}/dead/${enc(id)}/requeue`);
      return 1;
    }
    const r = (await this.#call("POST", `${Client.#q(queue)}/dead/requeue`)) as Json;
    return Number(r.count);
  }

  /** Deletes every dead job; answers how many. */
  async purgeDead(queue: string): Promise<number> {
    const r = (await this.#call("DELETE", `${Client.#q(queue)}/dead`)) as Json;
    return Number(r.count);
  }

  // --- Schedules ----------------------------------------------------------------------

  /** Creates or changes a schedule; answers it with its next fire. */
  async putSchedule(queue: string, name: string, spec: ScheduleSpec): Promise<Schedule> {
    const b: Json = { ...payloadFields(spec.payload) };
    if (spec.cron !== undefined) b.cron = spec.cron;
    if (spec.tz !== undefined) b.tz = spec.tz;
    if (spec.everyMs !== undefined) b.every_ms = spec.everyMs;
    if (spec.catchUp !== undefined) b.catch_up = spec.catchUp;
    if (spec.maxAttempts !== undefined) b.max_attempts = spec.maxAttempts;
    if (spec.backoff !== undefined) b.backoff = spec.backoff;
    if (spec.leaseMs !== undefined) b.lease_ms = spec.leaseMs;
    if (spec.timeoutMs !== undefined) b.timeout_ms = spec.timeoutMs;
    if (spec.target !== undefined) b.target = spec.target;
    return schedule((await this.#call("PUT", `${Client.#q(queue)}/schedules/${enc(name)}`, b)) as Json);
  }

  /** A queue's schedules, by name. */
  async listSchedules(queue: string): Promise<Schedule[]> {
    const r = (await this.#call("GET", `${Client.#q(queue)}/schedules`)) as Json;
    return (r.schedules as Json[]).map(schedule);
  }

  /** Deletes a schedule; `false` when there was none. */
  async deleteSchedule(queue: string, name: string): Promise<boolean> {
    try {
      await this.#call("DELETE", `${Client.#q(queue)}/schedules/${enc(name)}`);
      return true;
    } catch (e) {
      if ((e as DelayqError).code === "not_found") return false;
      throw e;
    }
  }
}
