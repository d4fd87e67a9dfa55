// Worker: runs a handler for each job of a queue. It long-polls for as many jobs as it has free
// slots, lets the acks of finished jobs ride on its next claim, extends each lease while its
// handler runs, and on close() stops claiming, cuts its poll short, lets running handlers
// finish and gives back what it had not started.

import { randomUUID } from "node:crypto";

import type { Client, Ack } from "./client.js";
import { DelayqError } from "./errors.js";
import type { ClaimedJob, QueueChoice } from "./types.js";

/** Throw from a handler to retry the job after `ms` instead of the queue's backoff. */
export class RetryIn extends Error {
  constructor(
    readonly ms: number,
    message = `retry in ${ms} ms`,
  ) {
    super(message);
    this.name = "RetryIn";
  }
}

/** Throw from a handler to dead-letter the job at once (no more attempts). */
export class DeadLetter extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "DeadLetter";
  }
}

/** A job as a handler receives it. */
export interface Job {
  id: string;
  /** Its queue (one of the worker's). */
  queue: string;
  payload: unknown;
  /** This delivery's number, 1 for the first. */
  attempt: number;
  maxAttempts: number;
  dueAt: Date;
  /** The error of the previous attempt. */
  lastError?: string;
  /**
   * Aborted when the job's `timeoutMs` has passed (the attempt is then failed with `timeout`)
   * or when the job is cancelled while it runs (`client.cancel(q, id, {running: true})`: the
   * reason is a `DelayqError` with code `cancelled`, and the job is neither acked nor retried).
   */
  signal: AbortSignal;
  /** The W3C trace context the job was enqueued with: continue its trace from it. */
  traceparent?: string;
  tracestate?: string;
}

/**
 * A job's handler: resolving acks the job — with the resolved value, unless `undefined`, as
 * its result (kept while the queue keeps done jobs) — and throwing fails the attempt.
 */
export type Handler = (job: Job) => unknown | Promise<unknown>;

/** Largest result a handler may return, in bytes (as JSON text, or the bytes themselves). */
export const MAX_RESULT_BYTES = 65_535;

/** The size of `result` as sent; -1 for none (`undefined`, or nothing JSON can write). */
function resultSize(result: unknown): number {
  if (result === undefined) return -1;
  if (result instanceof Uint8Array) return result.length;
  const text = JSON.stringify(result) as string | undefined;
  return text === undefined ? -1 : Buffer.byteLength(text);
}

/** How a worker runs. */
export interface WorkerOptions {
  /** With several queues: serve them in the order given (default: share claims by weight). */
  strict?: boolean;
  /** Jobs run at once (default 4). */
  concurrency?: number;
  /** Lease of each job, ms (default 30,000); extended every third of it while the handler runs. */
  leaseMs?: number;
  /** How long one claim waits for a due job, ms (default 5,000). */
  waitMs?: number;
  /** Aborting it closes the worker, as `close()` does. */
  signal?: AbortSignal;
  /** How long a handler whose job was cancelled while it ran may take to stop, ms (default 10,000). */
  cancelGraceMs?: number;
  /** Told of errors the worker handles itself (a failed claim, a lost lease); default: console.error. */
  onError?: (err: unknown, job?: ClaimedJob) => void;
}

/**
 * A claim in flight longer than this is waiting on the server (one that finds jobs answers in a
 * few ms): finished jobs' acks then go on their own instead of waiting for the next claim.
 */
const SLOW_CLAIM_MS = 20;

/** How often a worker that runs jobs asks which of them were cancelled, ms. */
const CANCEL_CHECK_MS = 500;

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });

/**
 * Runs `handler` for the jobs of `queue` — or of several queues (names or `{name, weight}`),
 * by weight among those with due jobs or, with `strict`, in the order given, through one long
 * poll over all of them (`POST /v1/claim`).
 */
export class Worker {
  readonly #client: Client;
  readonly #queue: string;
  readonly #queues: QueueChoice[];
  readonly #strict: boolean;
  readonly #handler: Handler;
  readonly #concurrency: number;
  readonly #leaseMs: number;
  readonly #waitMs: number;
  readonly #onError: (err: unknown, job?: ClaimedJob) => void;
  readonly #stop = new AbortController();
  readonly #running = new Set<Promise<void>>();
  readonly #cancelGraceMs: number;
  /** The running jobs' leases and their handlers' abort controllers, by `queue\0id`. */
  readonly #leases = new Map<string, { queue: string; id: string; leaseToken: number; abort: AbortController }>();
  #checker?: ReturnType<typeof setInterval>;
  #acks: (Ack & { queue: string })[] = [];
  /** The name of the claim waiting on the server, if one is. */
  #poll?: string;
  /** When the claim in flight was sent. */
  #pollSince = 0;
  /** Ack batches sent while a claim waited. */
  readonly #flushing = new Set<Promise<void>>();
  #done?: Promise<void>;

  constructor(client: Client, queue: string | QueueChoice[], handler: Handler, opts: WorkerOptions = {}) {
    this.#client = client;
    this.#queues = typeof queue === "string" ? [queue] : [...queue];
    if (this.#queues.length === 0) throw new DelayqError("invalid_body", "a worker serves at least one queue", { retryable: false });
    const first = this.#queues[0];
    this.#queue = typeof first === "string" ? first : first.name;
    this.#strict = opts.strict ?? false;
    this.#handler = handler;
    this.#concurrency = Math.max(1, opts.concurrency ?? 4);
    this.#leaseMs = opts.leaseMs ?? 30_000;
    this.#waitMs = opts.waitMs ?? 5_000;
    this.#cancelGraceMs = opts.cancelGraceMs ?? 10_000;
    this.#onError = opts.onError ?? ((e) => console.error("delayq worker:", e));
    if (opts.signal) {
      if (opts.signal.aborted) this.#stop.abort();
      else opts.signal.addEventListener("abort", () => void this.close(), { once: true });
    }
  }

  /** Claims and runs jobs until `close()` (or the signal); settles once everything is finished or given back. */
  run(): Promise<void> {
    this.#done ??= this.#loop();
    return this.#done;
  }

  /** Stops claiming, cuts the waiting claim short, lets running handlers finish, gives back unstarted jobs. */
  async close(): Promise<void> {
    if (!this.#stop.signal.aborted) {
      this.#stop.abort();
      const poll = this.#poll;
      // (A claim over several queues is cut through the first of them.)
      if (poll) await this.#client.cutPoll(this.#queue, poll).catch(() => undefined);
    }
    await this.#done;
  }

  async #loop(): Promise<void> {
    const stop = this.#stop.signal;
    let failures = 0;
    while (!stop.aborted) {
      const free = this.#concurrency - this.#running.size;
      if (free === 0) {
        await Promise.race(this.#running);
        continue;
      }
      const acks = this.#acks.splice(0, 1000);
      this.#poll = randomUUID();
      this.#pollSince = Date.now();
      // Acks of jobs that finish while this claim waits on the server go on their own.
      const slow = setTimeout(() => this.#flushSoon(), SLOW_CLAIM_MS);
      let jobs: ClaimedJob[];
      try {
        const waitMs = this.#running.size > 0 ? Math.min(this.#waitMs, 1000) : this.#waitMs;
        const r =
          this.#queues.length === 1
            ? await this.#client.claim(this.#queue, { max: free, leaseMs: this.#leaseMs, waitMs, acks, pollId: this.#poll })
            : await this.#client.claimMany(this.#queues, { max: free, leaseMs: this.#leaseMs, waitMs, strict: this.#strict, acks, pollId: this.#poll });
        jobs = r.jobs;
        failures = 0;
      } catch (e) {
        // The acks may not have arrived: they go again (an ack repeated answers not_found).
        this.#acks.unshift(...acks);
        this.#onError(e);
        failures++;
        await sleep(Math.min(5000, 100 * 2 ** failures), stop);
        continue;
      } finally {
        clearTimeout(slow);
        this.#poll = undefined;
      }
      if (stop.aborted) {
        await this.#giveBack(jobs);
        break;
      }
      for (const j of jobs) this.#start(j);
    }
    while (this.#running.size) await Promise.race(this.#running);
    await Promise.all(this.#flushing);
    await this.#flushAcks();
  }

  async #giveBack(jobs: ClaimedJob[]): Promise<void> {
    await Promise.all(
      jobs.map((j) => this.#client.release(j.queue ?? this.#queue, j.id, j.leaseToken, true).catch((e) => this.#onError(e, j))),
    );
  }

  /**
   * While a claim waits on the server, acks do not wait for the next claim (a job whose lease
   * ran out meanwhile would be handed out again): they go at once.
   */
  #flushSoon(): void {
    if (!this.#poll || this.#acks.length === 0 || Date.now() - this.#pollSince < SLOW_CLAIM_MS) return;
    const acks = this.#acks.splice(0, 1000);
    const p = this.#ackEach(acks)
      .then(() => undefined)
      .catch((e) => {
        this.#acks.unshift(...acks);
        this.#onError(e);
      })
      .finally(() => this.#flushing.delete(p));
    this.#flushing.add(p);
  }

  async #flushAcks(): Promise<void> {
    while (this.#acks.length) {
      const batch = this.#acks.splice(0, 1000);
      try {
        await this.#ackEach(batch);
      } catch (e) {
        this.#onError(e);
        return;
      }
    }
  }

  /** Acks each job in its own queue (one request per queue). */
  async #ackEach(acks: (Ack & { queue: string })[]): Promise<void> {
    for (const q of new Set(acks.map((a) => a.queue))) {
      await this.#client.ackBatch(
        q,
        acks.filter((a) => a.queue === q),
      );
    }
  }

  #start(c: ClaimedJob): void {
    const p = this.#run(c).finally(() => this.#running.delete(p));
    this.#running.add(p);
  }

  /** Asks which running jobs were cancelled, every CANCEL_CHECK_MS while any runs. */
  #watchCancels(): void {
    if (this.#checker) return;
    this.#checker = setInterval(() => {
      if (this.#leases.size === 0) {
        clearInterval(this.#checker);
        this.#checker = undefined;
        return;
      }
      const asked = [...this.#leases.values()].filter((l) => !l.abort.signal.aborted);
      if (asked.length === 0) return;
      this.#client
        .cancelledLeases(asked.slice(0, 1000))
        .then((found) => {
          for (const l of found) this.#cancelled(l.queue, l.id);
        })
        .catch(() => undefined);
    }, CANCEL_CHECK_MS);
    // The check alone never keeps the process alive.
    this.#checker.unref?.();
  }

  /** Aborts the handler of a job cancelled while it runs. */
  #cancelled(queue: string, id: string): void {
    const l = this.#leases.get(`${queue}\0${id}`);
    if (l && !l.abort.signal.aborted) {
      l.abort.abort(new DelayqError("cancelled", `job ${id} was cancelled while it ran`, { retryable: false }));
    }
  }

  async #run(c: ClaimedJob): Promise<void> {
    const timeout = new AbortController();
    const queue = c.queue ?? this.#queue;
    const key = `${queue}\0${c.id}`;
    this.#leases.set(key, { queue, id: c.id, leaseToken: c.leaseToken, abort: timeout });
    this.#watchCancels();
    // The job was cancelled while it ran (#cancelled aborts with that reason), not timed out.
    const wasCancelled = () => (timeout.signal.reason as DelayqError | undefined)?.code === "cancelled";
    const cancelled = new Promise<"cancelled">((resolve) =>
      timeout.signal.addEventListener("abort", () => wasCancelled() && resolve("cancelled"), { once: true }),
    );
    const job: Job = {
      id: c.id,
      queue,
      payload: c.payload,
      attempt: c.attempt,
      maxAttempts: c.maxAttempts,
      dueAt: c.dueAt,
      lastError: c.lastError,
      signal: timeout.signal,
      traceparent: c.traceparent,
      tracestate: c.tracestate,
    };
    const every = Math.max(10, Math.floor(this.#leaseMs / 3));
    const extender = setInterval(() => {
      this.#client.extend(queue, c.id, c.leaseToken, this.#leaseMs).catch((e) => {
        if ((e as DelayqError).code === "cancelled") this.#cancelled(queue, c.id);
        else this.#onError(e, c);
      });
    }, every);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      if (c.timeoutMs !== undefined) {
        timer = setTimeout(() => {
          timeout.abort(new DelayqError("timeout", `the attempt ran over its ${c.timeoutMs} ms`, { retryable: false }));
          resolve("timeout");
        }, c.timeoutMs);
      }
    });
    try {
      let result: unknown;
      const handled = Promise.resolve()
        .then(() => this.#handler(job))
        .then((r) => {
          result = r;
          return "ok" as const;
        });
      const outcome = await Promise.race([handled, timedOut, cancelled]);
      const size = resultSize(result);
      if (wasCancelled()) {
        // Its store ended it already: nothing to ack or nack. The handler gets its grace to
        // stop before its slot is given to another job.
        clearInterval(extender);
        await Promise.race([handled.catch(() => undefined), sleep(this.#cancelGraceMs)]);
      } else if (outcome === "timeout") {
        await this.#nack(c, { error: "timeout" });
      } else if (size > MAX_RESULT_BYTES) {
        // The work is done: running it again is the operator's call (the server would refuse
        // the ack, and the acks riding with it).
        await this.#nack(c, { error: `result of ${size} bytes is over the limit of ${MAX_RESULT_BYTES} bytes`, dead: true });
      } else {
        if (size < 0) result = undefined;
        this.#acks.push({ queue: c.queue ?? this.#queue, id: c.id, leaseToken: c.leaseToken, result });
        this.#flushSoon();
      }
    } catch (e) {
      if (wasCancelled()) return;
      if (e instanceof RetryIn) await this.#nack(c, { error: e.message, retryInMs: e.ms });
      else if (e instanceof DeadLetter) await this.#nack(c, { error: e.message, dead: true });
      else await this.#nack(c, { error: e instanceof Error ? e.message : String(e) });
    } finally {
      clearInterval(extender);
      if (timer) clearTimeout(timer);
      this.#leases.delete(key);
    }
  }

  async #nack(c: ClaimedJob, opts: { error: string; retryInMs?: number; dead?: boolean }): Promise<void> {
    try {
      await this.#client.nack(c.queue ?? this.#queue, c.id, c.leaseToken, opts);
    } catch (e) {
      this.#onError(e, c);
    }
  }
}
