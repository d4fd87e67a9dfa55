// The shapes the client answers with: the API's JSON (wire.ts, generated from the OpenAPI
// document) in camelCase, times as Date. Values the client passes through as the wire has them
// (a push target, a backoff, a queue's settings) are the generated types themselves.

import type * as wire from "./wire.js";

/** A push target: the payload is sent there by HTTP at the due time (`delayq serve --push`). */
export type Target = wire.TargetView;

/** Retry backoff: `{kind: "fixed", delay_ms}`, or `{kind: "exponential" | "exponential_jitter", base_ms, cap_ms}`. */
export type Backoff = wire.Backoff;

/** Options of one enqueue. */
export interface EnqueueOptions {
  /** The job's id: enqueueing the same id again stores nothing (generated when absent). */
  id?: string;
  /** Due in this many ms. */
  delayMs?: number;
  /** Due at this time (a Date, ms since the epoch, or RFC 3339 text). */
  runAt?: Date | number | string;
  /** Deliveries before the job is dead-lettered (default 10). */
  maxAttempts?: number;
  /** 0-9, higher first among due jobs (default 5). */
  priority?: number;
  /**
   * Its key (a tenant, a customer, an upstream host: 1-128 bytes): the queue shares its claims
   * among the keys with due jobs, and its `key_max_in_flight` and `key_rate` bound each key.
   */
  key?: string;
  /** Deliver by HTTP push instead of a worker. */
  target?: Target;
  /** When the id exists: `keep` (default) or `replace` (debounce a scheduled job). */
  onConflict?: wire.OnConflict;
  /** Retry backoff. */
  backoff?: Backoff;
  /** Lease length for this job, ms. */
  leaseMs?: number;
  /** Longest one attempt may run, ms. */
  timeoutMs?: number;
  /** Dead-letter the job instead of starting it after this time. */
  expiresAt?: Date | number | string;
  /** Keep the job readable as `done` this long after it completes, ms. */
  keepDoneMs?: number;
  /** Refuse its id this long after it completes, ms. */
  dedupeMs?: number;
  /** W3C trace context to carry (default: the active OpenTelemetry context, if any). */
  traceparent?: string;
  /** The `tracestate` that goes with `traceparent`. */
  tracestate?: string;
  /**
   * Jobs it waits for (ids of the same queue, or `{ queue, id }`): until each has ended its
   * state is `waiting`; then it is due at the later of its own due time and that end.
   */
  dependsOn?: (string | { queue: string; id: string })[];
  /** What a dead or cancelled dependency does: `dead` (default), `cancel` or `run`. */
  onDependencyFailure?: wire.OnDependencyFailure;
  /** Its claim carries `dependencies` with their results. */
  includeDependencyResults?: boolean;
}

/** One dependency of a job: how it stands, and its result (in a claim that asked for it). */
export interface Dependency {
  queue: string;
  id: string;
  state: wire.DepOutcome;
  result?: unknown;
}

/** A job of a flow (`createFlow`): its queue, payload and options, its id required. */
export interface FlowJob extends EnqueueOptions {
  queue: string;
  id: string;
  payload: unknown;
}

/** A job of a batch: its payload and options. */
export interface BatchJob extends EnqueueOptions {
  payload: unknown;
}

/** The answer to an enqueue. */
export interface Enqueued {
  id: string;
  /** When it is due (the existing job's due time when the id existed). */
  dueAt: Date;
  /** `false` when the id existed and nothing was written. */
  created: boolean;
  /** With `onConflict: "replace"`: the scheduled job was replaced. */
  replaced: boolean;
  /** With `onConflict: "replace"`, when the existing job was not touched: its state. */
  state?: wire.JobState;
}

/** A stored job; `P`: the type its payload is read as (`client.get<Order>(…)`). */
export interface JobInfo<P = unknown> {
  id: string;
  /** `scheduled`, `leased`, `dead` or `done` (`due` in a listing of due jobs). */
  state: wire.ListedState;
  attempt: number;
  maxAttempts: number;
  dueAt: Date;
  createdAt: Date;
  /** The payload: its JSON value, or the bytes when it is not JSON. */
  payload: P;
  priority: number;
  leaseDeadline?: Date;
  failedAt?: Date;
  completedAt?: Date;
  lastError?: string;
  /** A done job's result, as its handler returned it (JSON value, or bytes). */
  result?: unknown;
  timeoutMs?: number;
  expiresAt?: Date;
  target?: Target;
  /** The W3C trace context it was enqueued with. */
  traceparent?: string;
  tracestate?: string;
  /** Its key, if it carries one. */
  key?: string;
  /** A job enqueued with `dependsOn`: its dependencies and how each stands. */
  dependencies?: Dependency[];
}

/** A job leased to a worker; `P`: the type its payload is read as. */
export interface ClaimedJob<P = unknown> {
  id: string;
  /** Give it back with ack, nack, extend and release. */
  leaseToken: number;
  /** This delivery's number, 1 for the first. */
  attempt: number;
  maxAttempts: number;
  dueAt: Date;
  createdAt: Date;
  leaseDeadline: Date;
  payload: P;
  priority: number;
  lastError?: string;
  /** Longest this attempt may run, ms. */
  timeoutMs?: number;
  /** The W3C trace context it was enqueued with: continue its trace from it. */
  traceparent?: string;
  tracestate?: string;
  /** Its queue, in the answer of a claim over several queues (`claimMany`). */
  queue?: string;
  /** Its key, if it carries one. */
  key?: string;
  /** Enqueued with `includeDependencyResults`: its dependencies, how each ended, results. */
  dependencies?: Dependency[];
}

/** One key's hold, after `pauseKey` or `resumeKey`. */
export interface KeyHold {
  queue: string;
  key: string;
  /** When the hold ends; absent: not held. */
  pausedUntil?: Date;
}

/** One key of a queue (`keys`): its jobs in flight and due, and its hold. */
export interface KeyStats {
  key: string;
  inFlight: number;
  due: number;
  /** When its hold ends; absent: not held. */
  pausedUntil?: Date;
}

/** A queue of a claim over several, with its share among those with due jobs. */
export type QueueChoice = string | { name: string; weight?: number };

/** What a claim answered. */
export interface Claimed {
  jobs: ClaimedJob[];
  /** Per ack the claim carried, in order: `acked`, `lease_lost` or `not_found`. */
  acks: wire.AckOutcome[];
  /** With no job and no waiting: ms until the next job is due. */
  nextDueInMs?: number;
}

/** A start-rate limit. */
export type Rate = wire.RateView;

/** A queue's settings, as the API shows them. */
export type QueueSettings = wire.SettingsView;

/** A queue's counts. */
export interface QueueStats {
  queue: string;
  scheduled: number;
  due: number;
  dueNextMinute: number;
  leased: number;
  dead: number;
  oldestOverdueMs: number;
  paused: boolean;
  waitingOnLimit: number;
  done: number;
}

/** A queue's counts and settings. */
export interface QueueInfo extends QueueStats {
  settings?: QueueSettings;
}

/** A settings change: the fields given (`null` removes a limit or the target). */
export type SettingsPatch = wire.SettingsPatch;

/** A schedule to store: `cron` (with `tz`) or `everyMs`, and the payload of each fire's job. */
export interface ScheduleSpec {
  cron?: string;
  tz?: string;
  everyMs?: number;
  payload: unknown;
  catchUp?: "none" | "one" | "all";
  maxAttempts?: number;
  backoff?: Backoff;
  leaseMs?: number;
  timeoutMs?: number;
  target?: Target;
}

/** A stored schedule. */
export interface Schedule {
  name: string;
  cron?: string;
  tz?: string;
  everyMs?: number;
  catchUp: string;
  /** The next fire; its job's id is `NAME@<ms>`. */
  nextFire: Date;
  payload: unknown;
  maxAttempts?: number;
}

/** A batch's callback: the job enqueued once when the batch is done. */
export interface BatchCallback {
  /** The queue it goes to. */
  queue: string;
  /** Its payload, a JSON object; the callback adds `batch: {id, total, succeeded, dead, cancelled}`. */
  payload?: Record<string, unknown>;
  /** Due this long after the batch is done, ms. */
  delayMs?: number;
}

/** How `createBatch` makes a batch. */
export interface CreateBatchOptions {
  /** The batch's id (generated by the server when absent). */
  id?: string;
  /** Enqueued when every job has ended (acked, dead or cancelled): `batch-<id>-complete`. */
  onComplete?: BatchCallback;
  /** Enqueued when every job has ended and none is dead: `batch-<id>-success`. */
  onSuccess?: BatchCallback;
  /** Keep it open: jobs may be added (`addToBatch`) until it is closed. */
  open?: boolean;
  /** The callbacks carry the jobs' results. */
  includeResults?: boolean;
}

/** A batch and how its jobs stand. */
export interface Batch {
  id: string;
  queue: string;
  /**
   * `open` (jobs may join), `closed` (waiting for its jobs), `done` (callbacks enqueued) or
   * `callback_failed` (its jobs ended but its callbacks could not be enqueued: see
   * `callbackError`; tried again with a backoff).
   */
  state: wire.BatchState;
  total: number;
  pending: number;
  succeeded: number;
  dead: number;
  cancelled: number;
  createdAt: Date;
  doneAt?: Date;
  /** Why its callbacks could not be enqueued (state `callback_failed`). */
  callbackError?: string;
  /** Failed tries of its callbacks. */
  callbackAttempts?: number;
  /** Their next try. */
  callbackNextTryAt?: Date;
}
