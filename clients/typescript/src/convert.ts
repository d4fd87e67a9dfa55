// The thin idiomatic layer: the generated wire types (wire.ts, snake_case, ms since the epoch)
// to and from the client's own (camelCase, Date, typed payloads). Every wire shape comes from
// wire.ts, so a change to the API fails the compile here until this layer follows.

import { randomUUID } from "node:crypto";

import type {
  Batch,
  BatchCallback,
  Claimed,
  ClaimedJob,
  Dependency,
  EnqueueOptions,
  Enqueued,
  JobInfo,
  KeyHold,
  KeyStats,
  QueueInfo,
  QueueStats,
  Schedule,
  ScheduleSpec,
} from "./types.js";
import type * as wire from "./wire.js";

/** An ack a claim may carry. */
export interface Ack {
  id: string;
  leaseToken: number;
  /** The handler's result, kept with the done job (see `ack`). */
  result?: unknown;
}

export const date = (ms: number): Date => new Date(ms);
export const optDate = (ms: number | null | undefined): Date | undefined => (ms == null ? undefined : date(ms));
const opt = <T>(v: T | null | undefined): T | undefined => v ?? undefined;

/** A time as the wire takes it: ms since the epoch or RFC 3339 text. */
export function timeOf(v: Date | number | string): wire.Time {
  return v instanceof Date ? v.getTime() : v;
}

const bytes = (b64: string): Uint8Array => new Uint8Array(Buffer.from(b64, "base64"));

/** A payload out of an answer: its JSON value, or the bytes when it was not JSON. */
export function payloadOf(j: { payload?: wire.Json; payload_b64?: string | null }): unknown {
  return typeof j.payload_b64 === "string" ? bytes(j.payload_b64) : j.payload;
}

/** A done job's result out of an answer (`undefined` when it has none). */
function resultOf(j: { result?: wire.Json; result_b64?: string | null }): unknown {
  return typeof j.result_b64 === "string" ? bytes(j.result_b64) : j.result;
}

/** An ack's result fields (none for `undefined`). */
export function resultFields(result: unknown): Pick<wire.AckRequest, "result" | "result_b64"> {
  if (result === undefined) return {};
  if (result instanceof Uint8Array) return { result_b64: Buffer.from(result).toString("base64") };
  return { result };
}

export function payloadFields(payload: unknown): Pick<wire.EnqueueRequest, "payload" | "payload_b64"> {
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

export function jobBody(payload: unknown, o: EnqueueOptions): wire.EnqueueRequest {
  return {
    id: o.id ?? newId(o.key),
    ...payloadFields(payload),
    delay_ms: o.delayMs,
    run_at: o.runAt === undefined ? undefined : timeOf(o.runAt),
    max_attempts: o.maxAttempts,
    priority: o.priority,
    key: o.key,
    target: o.target,
    on_conflict: o.onConflict,
    backoff: o.backoff,
    lease_ms: o.leaseMs,
    timeout_ms: o.timeoutMs,
    expires_at: o.expiresAt === undefined ? undefined : timeOf(o.expiresAt),
    keep_done_ms: o.keepDoneMs,
    dedupe_ms: o.dedupeMs,
    traceparent: o.traceparent,
    tracestate: o.tracestate,
    depends_on: o.dependsOn,
    on_dependency_failure: o.onDependencyFailure,
    include_dependency_results: o.includeDependencyResults,
  };
}

/** The dependencies of an answer, when it has any. */
function dependenciesOf(d: wire.DepView[] | undefined): Dependency[] | undefined {
  if (!d || d.length === 0) return undefined;
  return d.map((x) => ({ queue: x.queue, id: x.id, state: x.state, result: resultOf(x) }));
}

export function callbackBody(c: BatchCallback): wire.CallbackBody {
  return { queue: c.queue, payload: c.payload ?? {}, delay_ms: c.delayMs };
}

export function ackOf(a: Ack): wire.ClaimAck {
  return { id: a.id, lease_token: a.leaseToken, ...resultFields(a.result) };
}

export function batchOf(b: wire.BatchView): Batch {
  return {
    id: b.id,
    queue: b.queue,
    state: b.state,
    total: b.total,
    pending: b.pending,
    succeeded: b.succeeded,
    dead: b.dead,
    cancelled: b.cancelled,
    createdAt: date(b.created_at_ms),
    doneAt: optDate(b.done_at_ms),
    callbackError: opt(b.callback_error),
    callbackAttempts: opt(b.callback_attempts),
    callbackNextTryAt: optDate(b.callback_next_try_at_ms),
  };
}

export function enqueued(e: wire.EnqueueResponse): Enqueued {
  return { id: e.id, dueAt: date(e.due_at), created: e.created, replaced: e.replaced ?? false, state: opt(e.state) };
}

export function jobInfo<P = unknown>(j: wire.JobView): JobInfo<P> {
  return {
    id: j.id,
    state: j.state,
    attempt: j.attempt,
    maxAttempts: j.max_attempts,
    dueAt: date(j.due_at),
    createdAt: date(j.created_at),
    payload: payloadOf(j) as P,
    priority: j.priority,
    leaseDeadline: optDate(j.lease_deadline),
    failedAt: optDate(j.failed_at),
    completedAt: optDate(j.completed_at),
    lastError: opt(j.last_error),
    result: resultOf(j),
    timeoutMs: opt(j.timeout_ms),
    expiresAt: optDate(j.expires_at),
    target: opt(j.target),
    traceparent: opt(j.traceparent),
    tracestate: opt(j.tracestate),
    key: opt(j.key),
    dependencies: dependenciesOf(j.dependencies),
  };
}

function claimedJob(j: wire.ClaimedJob): ClaimedJob {
  return {
    id: j.id,
    leaseToken: j.lease_token,
    attempt: j.attempt,
    maxAttempts: j.max_attempts,
    dueAt: date(j.due_at),
    createdAt: date(j.created_at),
    leaseDeadline: date(j.lease_deadline),
    payload: payloadOf(j),
    priority: j.priority,
    lastError: opt(j.last_error),
    timeoutMs: opt(j.timeout_ms),
    traceparent: opt(j.traceparent),
    tracestate: opt(j.tracestate),
    queue: opt(j.queue),
    key: opt(j.key),
    dependencies: dependenciesOf(j.dependencies),
  };
}

/** A claim's answer (one queue's or several's). */
export function claimed(r: wire.ClaimResponse): Claimed {
  return { jobs: r.jobs.map(claimedJob), acks: r.acks ?? [], nextDueInMs: opt(r.next_due_in_ms) };
}

export function keyHold(v: wire.KeyHoldView): KeyHold {
  return { queue: v.queue, key: v.key, pausedUntil: optDate(v.paused_until) };
}

export function keyStats(k: wire.KeyView): KeyStats {
  return { key: k.key, inFlight: k.in_flight, due: k.due, pausedUntil: optDate(k.paused_until) };
}

export function queueInfo(q: wire.QueueView): QueueInfo {
  const s: QueueStats = {
    queue: q.queue,
    scheduled: q.scheduled,
    due: q.due,
    dueNextMinute: q.due_next_minute,
    leased: q.leased,
    dead: q.dead,
    oldestOverdueMs: q.oldest_overdue_ms,
    paused: q.paused ?? false,
    waitingOnLimit: q.waiting_on_limit ?? 0,
    done: q.done ?? 0,
  };
  return q.settings ? { ...s, settings: q.settings } : s;
}

export function scheduleBody(spec: ScheduleSpec): wire.ScheduleBody {
  return {
    ...payloadFields(spec.payload),
    cron: spec.cron,
    tz: spec.tz,
    every_ms: spec.everyMs,
    catch_up: spec.catchUp,
    max_attempts: spec.maxAttempts,
    backoff: spec.backoff,
    lease_ms: spec.leaseMs,
    timeout_ms: spec.timeoutMs,
    target: spec.target,
  };
}

export function schedule(s: wire.ScheduleView): Schedule {
  return {
    name: s.name,
    cron: opt(s.cron),
    tz: opt(s.tz),
    everyMs: opt(s.every_ms),
    catchUp: s.catch_up,
    nextFire: date(s.next_fire),
    payload: payloadOf(s),
    maxAttempts: opt(s.max_attempts),
  };
}
