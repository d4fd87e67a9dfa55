// Client: one method per /v1 operation of a delayq server, over Node's http module with
// keep-alive (transport.ts). Calls that are safe to repeat are retried when no answer comes or
// the server is unavailable; an enqueue is one of them because every job gets its id here,
// before the first try.

import {
  type Ack,
  ackOf,
  batchOf,
  callbackBody,
  claimed,
  date,
  enqueued,
  jobBody,
  jobInfo,
  keyHold,
  keyStats,
  queueInfo,
  resultFields,
  schedule,
  scheduleBody,
  timeOf,
} from "./convert.js";
import { DelayqError } from "./errors.js";
import { type Answer, send } from "./transport.js";
import type {
  Batch,
  BatchJob,
  CreateBatchOptions,
  Claimed,
  EnqueueOptions,
  Enqueued,
  FlowJob,
  JobInfo,
  KeyHold,
  KeyStats,
  QueueChoice,
  QueueInfo,
  QueueStats,
  Schedule,
  ScheduleSpec,
  SettingsPatch,
} from "./types.js";
import type * as wire from "./wire.js";

export type { Ack } from "./convert.js";

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

const enc = encodeURIComponent;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A signal aborted when either given one is (AbortSignal.any needs Node 20.3); none when neither is given. */
function anySignal(a: AbortSignal, b?: AbortSignal): AbortSignal;
function anySignal(a?: AbortSignal, b?: AbortSignal): AbortSignal | undefined;
function anySignal(a?: AbortSignal, b?: AbortSignal): AbortSignal | undefined {
  if (!a || !b) return a ?? b;
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
    const signal = anySignal(call.signal, this.#signal);
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
    const given = anySignal(signal, this.#signal);
    const both = anySignal(timeout, given);
    let resp: Answer;
    try {
      resp = await send(new URL(this.baseUrl + path), method, headers, body === undefined ? undefined : JSON.stringify(body), both);
    } catch (e) {
      if (timeout.aborted) throw new DelayqError("timeout", `${method} ${path}: no answer in time`);
      if (given?.aborted) throw new DelayqError("aborted", `${method} ${path}: aborted`, { retryable: false });
      const cause = (e as { message?: string }).message ?? String(e);
      throw new DelayqError("connection_failed", `delayq server ${this.baseUrl}: ${cause}`);
    }
    const text = resp.text;
    const ok = resp.status >= 200 && resp.status < 300;
    let json: unknown = undefined;
    if (text) {
      try {
        json = JSON.parse(text);
      } catch {
        if (ok) throw new DelayqError("bad_answer", `not JSON: ${text.slice(0, 200)}`, { retryable: false });
      }
    }
    if (ok) return json;
    const b = (json ?? {}) as Partial<wire.ErrorBody>;
    const retryAfter = resp.retryAfter;
    throw new DelayqError(
      typeof b.code === "string" ? b.code : resp.status === 503 ? "unavailable" : `http_${resp.status}`,
      typeof b.message === "string" ? b.message : text.slice(0, 200),
      {
        status: resp.status,
        state: b.state ?? undefined,
        retryAfterS: retryAfter && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined,
      },
    );
  }

  /** One call, repeated as `repeat` allows; `R`: the wire type of its answer. */
  async #call<R = unknown>(
    method: string,
    path: string,
    body?: object,
    opts: { repeat?: boolean; extraMs?: number; signal?: AbortSignal } = {},
  ): Promise<R> {
    for (let attempt = 0; ; attempt++) {
      try {
        return (await this.#once(method, path, body, opts.extraMs ?? 0, opts.signal)) as R;
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
    const body: wire.EnqueueRequest = jobBody(payload, opts);
    return enqueued(await this.#call<wire.EnqueueResponse>("POST", `${Client.#q(queue)}/jobs`, body));
  }

  /** Enqueues a batch atomically (1-10,000 jobs); one answer per job, in order. */
  async enqueueBatch(queue: string, jobs: BatchJob[]): Promise<Enqueued[]> {
    const body: wire.EnqueueRequest[] = jobs.map(({ payload, ...o }) => jobBody(payload, o));
    const out = await this.#call<wire.EnqueueResponse[]>("POST", `${Client.#q(queue)}/jobs`, body);
    return out.map(enqueued);
  }

  // --- Batches ---------------------------------------------------------------------------

  /**
   * Creates a batch of jobs: when every one has ended (acked, dead or cancelled) its callbacks
   * are enqueued once. Closed at once unless `open`; an open batch of that id gains the jobs.
   */
  async createBatch(queue: string, jobs: BatchJob[], opts: CreateBatchOptions = {}): Promise<Batch> {
    const body: wire.BatchRequest = {
      id: opts.id,
      jobs: jobs.map(({ payload, ...o }) => jobBody(payload, o)),
      open: opts.open ?? false,
      include_results: opts.includeResults ?? false,
      on_complete: opts.onComplete && callbackBody(opts.onComplete),
      on_success: opts.onSuccess && callbackBody(opts.onSuccess),
    };
    // Sent once: a retry after a call that closed the batch would be refused.
    const r = await this.#call<wire.BatchAddedView>("POST", `${Client.#q(queue)}/batches`, body, { repeat: false });
    return batchOf(r.batch);
  }

  /** Adds jobs to an open batch (a `conflict` error once it is closed), closing it after them with `close`. */
  async addToBatch(queue: string, id: string, jobs: BatchJob[], opts: { close?: boolean } = {}): Promise<Batch> {
    const body: wire.BatchJobsRequest = { jobs: jobs.map(({ payload, ...o }) => jobBody(payload, o)), close: opts.close ?? false };
    const path = `${Client.#q(queue)}/batches/${enc(id)}/jobs`;
    return batchOf((await this.#call<wire.BatchAddedView>("POST", path, body, { repeat: false })).batch);
  }

  /** Closes a batch: no job joins it any more. */
  async closeBatch(queue: string, id: string): Promise<Batch> {
    return batchOf(await this.#call<wire.BatchView>("POST", `${Client.#q(queue)}/batches/${enc(id)}/close`));
  }

  /** One batch: its state and counts (a `not_found` error when there is none). */
  async batch(queue: string, id: string): Promise<Batch> {
    return batchOf(await this.#call<wire.BatchView>("GET", `${Client.#q(queue)}/batches/${enc(id)}`));
  }

  /** The batches of a queue not done yet, oldest first. */
  async batches(queue: string, opts: { limit?: number } = {}): Promise<Batch[]> {
    const r = await this.#call<wire.BatchList>("GET", `${Client.#q(queue)}/batches?limit=${opts.limit ?? 20}`);
    return r.batches.map(batchOf);
  }

  /** One job in any state; `null` when there is no such job. */
  async get<P = unknown>(queue: string, id: string): Promise<JobInfo<P> | null> {
    try {
      return jobInfo<P>(await this.#call<wire.JobView>("GET", Client.#job(queue, id)));
    } catch (e) {
      if ((e as DelayqError).code === "not_found") return null;
      throw e;
    }
  }

  /**
   * Cancels a scheduled job: `cancelled`, or why not. With `running: true` a job a worker runs
   * is cancelled too: `cancelling` — it is ended cancelled now and its worker aborts the
   * handler's `signal` within a second.
   */
  async cancel(
    queue: string,
    id: string,
    opts: { running?: boolean } = {},
  ): Promise<"cancelled" | "cancelling" | "not_found" | "leased" | "dead"> {
    try {
      const path = Client.#job(queue, id) + (opts.running ? "?running=true" : "");
      const o = await this.#call<wire.Outcome>("DELETE", path);
      if (o.outcome === "cancelling") return "cancelling";
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
    const body: wire.RescheduleRequest = { delay_ms: to.delayMs, run_at: to.runAt === undefined ? undefined : timeOf(to.runAt) };
    const o = await this.#call<wire.Outcome>("PATCH", Client.#job(queue, id), body);
    return { dueAt: date(o.due_at ?? Date.now()) };
  }

  /** Makes a scheduled job due now. */
  async runNow(queue: string, id: string): Promise<void> {
    await this.#call<wire.Outcome>("POST", Client.#job(queue, id, "/run"));
  }

  /** Every job in `state` (`scheduled`, `due`, `leased`, `dead`, `done`), page after page. */
  async *listJobs(queue: string, opts: { state: string; pageSize?: number }): AsyncGenerator<JobInfo> {
    const qs = new URLSearchParams({ state: opts.state, limit: String(opts.pageSize ?? 100) });
    yield* this.#pages(`${Client.#q(queue)}/jobs`, qs);
  }

  /** Every job of the listing at `path` (query `qs`), following `next_cursor` page by page. */
  async *#pages(path: string, qs: URLSearchParams): AsyncGenerator<JobInfo> {
    for (;;) {
      const page = await this.#call<wire.JobList>("GET", `${path}?${qs}`);
      for (const j of page.jobs) yield jobInfo(j);
      if (!page.next_cursor) return;
      qs.set("cursor", page.next_cursor);
    }
  }

  // --- Consumers ----------------------------------------------------------------------

  /** Leases due jobs, waiting up to `waitMs` for one; `acks` are applied first. Not retried. */
  async claim(
    queue: string,
    opts: { max?: number; leaseMs?: number; waitMs?: number; acks?: Ack[]; pollId?: string; signal?: AbortSignal } = {},
  ): Promise<Claimed> {
    const body: wire.ClaimRequest = {
      max: opts.max ?? 1,
      wait_ms: opts.waitMs ?? 0,
      lease_ms: opts.leaseMs,
      acks: opts.acks?.length ? opts.acks.map(ackOf) : undefined,
      poll_id: opts.pollId || undefined,
    };
    const r = await this.#call<wire.ClaimResponse>("POST", `${Client.#q(queue)}/claim`, body, {
      repeat: false,
      extraMs: opts.waitMs ?? 0,
      signal: opts.signal,
    });
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
    const body: wire.ClaimManyRequest = {
      queues: queues.map((q) => (typeof q === "string" ? { name: q } : { name: q.name, weight: q.weight })),
      max: opts.max ?? 1,
      wait_ms: opts.waitMs ?? 0,
      strict: opts.strict || undefined,
      lease_ms: opts.leaseMs,
      acks: opts.acks?.length ? opts.acks.map((a) => ({ queue: a.queue, ...ackOf(a) })) : undefined,
      poll_id: opts.pollId || undefined,
    };
    const r = await this.#call<wire.ClaimResponse>("POST", "/v1/claim", body, { repeat: false, extraMs: opts.waitMs ?? 0, signal: opts.signal });
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
    const body: wire.AckRequest = { lease_token: leaseToken, ...resultFields(opts.result) };
    await this.#call<wire.Outcome>("POST", Client.#job(queue, id, "/ack"), body);
  }

  /** Completes up to 1,000 jobs in one request; per ack `acked`, `lease_lost` or `not_found`. */
  /**
   * Which of `leases` were cancelled while their jobs ran (`DELETE …?running=true`): a worker
   * asks about the jobs it runs and aborts their handlers.
   */
  async cancelledLeases(leases: { queue: string; id: string; leaseToken: number }[]): Promise<{ queue: string; id: string; leaseToken: number }[]> {
    const body: wire.CancelledRequest = { leases: leases.map((l) => ({ queue: l.queue, id: l.id, lease_token: l.leaseToken })) };
    const r = await this.#call<wire.CancelledResponse>("POST", "/v1/leases/cancelled", body);
    return r.cancelled.map((l) => ({ queue: l.queue, id: l.id, leaseToken: l.lease_token }));
  }

  async ackBatch(queue: string, acks: Ack[]): Promise<wire.AckOutcome[]> {
    const body: wire.AckBatchRequest = { acks: acks.map(ackOf) };
    return (await this.#call<wire.AckBatchResponse>("POST", `${Client.#q(queue)}/acks`, body)).acks;
  }

  /** Fails an attempt: retried by backoff (or after `retryInMs`), or dead-lettered. */
  async nack(
    queue: string,
    id: string,
    leaseToken: number,
    opts: { error?: string; retryInMs?: number; dead?: boolean } = {},
  ): Promise<"retrying" | "dead"> {
    const body: wire.NackRequest = { lease_token: leaseToken, dead: opts.dead ?? false, error: opts.error, retry_in_ms: opts.retryInMs };
    const r = await this.#call<wire.Outcome>("POST", Client.#job(queue, id, "/nack"), body, { repeat: false });
    return r.outcome === "dead" ? "dead" : "retrying";
  }

  /** Extends a lease to `leaseMs` from now; answers the new deadline. */
  async extend(queue: string, id: string, leaseToken: number, leaseMs: number): Promise<Date> {
    const body: wire.ExtendRequest = { lease_token: leaseToken, lease_ms: leaseMs };
    const r = await this.#call<wire.Outcome>("POST", Client.#job(queue, id, "/extend"), body);
    return date(r.lease_deadline ?? Date.now());
  }

  /** Gives a lease back: the job is due again at once (the attempt not counted by default). */
  async release(queue: string, id: string, leaseToken: number, undoAttempt = true): Promise<void> {
    const body: wire.ReleaseRequest = { lease_token: leaseToken, undo_attempt: undoAttempt };
    await this.#call<wire.Outcome>("POST", Client.#job(queue, id, "/release"), body);
  }

  // --- Queues -------------------------------------------------------------------------

  /** Every queue that holds jobs, with its counts. */
  async queues(): Promise<QueueStats[]> {
    return (await this.#call<wire.QueueView[]>("GET", "/v1/queues")).map(queueInfo);
  }

  /** A queue's counts. */
  async stats(queue: string): Promise<QueueStats> {
    const { settings: _settings, ...s } = await this.getQueue(queue);
    return s;
  }

  /** A queue's counts and settings. */
  async getQueue(queue: string): Promise<QueueInfo> {
    return queueInfo(await this.#call<wire.QueueView>("GET", Client.#q(queue)));
  }

  /** Changes a queue's settings (the fields given; `null` removes a limit or the target); answers the queue. */
  async putQueue(queue: string, patch: SettingsPatch): Promise<QueueInfo> {
    return queueInfo(await this.#call<wire.QueueView>("PUT", Client.#q(queue), patch));
  }

  /** Pauses a queue: it accepts jobs and leases none. */
  async pause(queue: string): Promise<void> {
    await this.#call<wire.Outcome>("POST", `${Client.#q(queue)}/pause`);
  }

  /** Resumes a paused queue. */
  async resume(queue: string): Promise<void> {
    await this.#call<wire.Outcome>("POST", `${Client.#q(queue)}/resume`);
  }

  /**
   * Holds one key's due jobs until `until` or for `forMs` (an upstream's `Retry-After`): the
   * queue's other keys are claimed meanwhile.
   */
  async pauseKey(queue: string, key: string, hold: { forMs?: number; until?: Date | number | string }): Promise<KeyHold> {
    const body: wire.KeyPauseRequest = { for_ms: hold.forMs, until: hold.until === undefined ? undefined : timeOf(hold.until) };
    return keyHold(await this.#call<wire.KeyHoldView>("POST", `${Client.#q(queue)}/keys/${enc(key)}/pause`, body));
  }

  /** Lifts a key's hold: its due jobs are claimed again at once. */
  async resumeKey(queue: string, key: string): Promise<KeyHold> {
    return keyHold(await this.#call<wire.KeyHoldView>("POST", `${Client.#q(queue)}/keys/${enc(key)}/resume`));
  }

  /** The busiest keys of a queue: most jobs in flight and due first, then held ones. */
  async keys(queue: string, opts: { limit?: number } = {}): Promise<KeyStats[]> {
    const r = await this.#call<wire.KeyList>("GET", `${Client.#q(queue)}/keys?limit=${opts.limit ?? 20}`);
    return r.keys.map(keyStats);
  }

  /**
   * Enqueues a flow: jobs of any queues that wait for one another (`dependsOn`), checked
   * whole — a cycle, a dependency neither in the flow nor stored, or a bad job refuses it all
   * (`invalid_flow`), nothing written — then written dependencies first. Each job needs its
   * id, so a repeated flow stores nothing twice. Answers each job's enqueue, in order.
   */
  async createFlow(jobs: FlowJob[]): Promise<(Enqueued & { queue: string })[]> {
    const body: wire.FlowRequest = { jobs: jobs.map((j) => ({ queue: j.queue, ...jobBody(j.payload, j) })) };
    const r = await this.#call<wire.FlowResponse>("POST", "/v1/flows", body);
    return r.jobs.map((j) => ({ queue: j.queue, ...enqueued(j) }));
  }

  /**
   * Every job of one key, by id, page after page: scheduled, due, running (`leased`) and dead
   * ones, or only those in `state`. Costs the key's jobs, not the queue's.
   */
  async *keyJobs(queue: string, key: string, opts: { state?: string; pageSize?: number } = {}): AsyncGenerator<JobInfo> {
    const qs = new URLSearchParams({ limit: String(opts.pageSize ?? 100) });
    if (opts.state) qs.set("state", opts.state);
    yield* this.#pages(`${Client.#q(queue)}/keys/${enc(key)}/jobs`, qs);
  }

  /**
   * Cancels every scheduled and due job of one key ("user 42 deleted their account") — with
   * `running: true` its running jobs too, their handlers aborted as by `cancel(…, {running})`.
   * Answers how many were cancelled, and how many of those were running.
   */
  async cancelKey(queue: string, key: string, opts: { running?: boolean } = {}): Promise<{ cancelled: number; running: number }> {
    const body: wire.KeyCancelRequest = { running: opts.running ?? false };
    const r = await this.#call<wire.KeyCancelView>("POST", `${Client.#q(queue)}/keys/${enc(key)}/cancel`, body);
    return { cancelled: r.cancelled, running: r.running ?? 0 };
  }

  /**
   * Moves every scheduled and due job of one key: each by `shiftMs` from its own due time
   * (negative: earlier, never before now), or all to `dueAt`. Answers how many moved.
   */
  async rescheduleKey(queue: string, key: string, to: { shiftMs?: number; dueAt?: Date | number | string }): Promise<number> {
    const body: wire.KeyRescheduleRequest = { shift_ms: to.shiftMs, due_at: to.dueAt === undefined ? undefined : timeOf(to.dueAt) };
    const r = await this.#call<wire.KeyRescheduleView>("POST", `${Client.#q(queue)}/keys/${enc(key)}/reschedule`, body);
    return r.rescheduled;
  }

  // --- Dead letters -------------------------------------------------------------------

  /** Dead jobs, oldest failure first. */
  async listDead(queue: string, opts: { offset?: number; limit?: number } = {}): Promise<JobInfo[]> {
    const path = `${Client.#q(queue)}/dead?offset=${opts.offset ?? 0}&limit=${opts.limit ?? 100}`;
    return (await this.#call<wire.JobView[]>("GET", path)).map((j) => jobInfo(j));
  }

  /** Puts one dead job (or, without `id`, every one) back, due now; answers how many. */
  async requeueDead(queue: string, id?: string): Promise<number> {
    if (id !== undefined) {
      await this.#call<wire.Outcome>("POST", `${Client.#q(queue)}/dead/${enc(id)}/requeue`);
      return 1;
    }
    return (await this.#call<wire.Outcome>("POST", `${Client.#q(queue)}/dead/requeue`)).count ?? 0;
  }

  /** Deletes every dead job; answers how many. */
  async purgeDead(queue: string): Promise<number> {
    return (await this.#call<wire.Outcome>("DELETE", `${Client.#q(queue)}/dead`)).count ?? 0;
  }

  // --- Schedules ----------------------------------------------------------------------

  /** Creates or changes a schedule; answers it with its next fire. */
  async putSchedule(queue: string, name: string, spec: ScheduleSpec): Promise<Schedule> {
    const path = `${Client.#q(queue)}/schedules/${enc(name)}`;
    return schedule(await this.#call<wire.ScheduleView>("PUT", path, scheduleBody(spec)));
  }

  /** A queue's schedules, by name. */
  async listSchedules(queue: string): Promise<Schedule[]> {
    return (await this.#call<wire.ScheduleList>("GET", `${Client.#q(queue)}/schedules`)).schedules.map(schedule);
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
