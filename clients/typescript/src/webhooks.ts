// Verifying the requests `delayq serve --push` sends (Standard Webhooks): the signature is
// `v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">` keyed by the secret's
// bytes (`whsec_<base64>`); several space-separated signatures mean the sender holds several
// secrets (rotation): one match is enough.

import { createHmac, timingSafeEqual } from "node:crypto";

import { DelayqError } from "./errors.js";

/** Seconds a push request's timestamp may be away from now. */
export const DEFAULT_TOLERANCE_S = 300;

/** Request headers as Node (`req.headers`), fetch (`Headers`) or a plain object give them. */
export type HeaderBag =
  | Headers
  | Record<string, string | string[] | undefined>
  | Iterable<[string, string]>;

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") {
    return (headers as Headers).get(name) ?? undefined;
  }
  const entries: Iterable<[string, unknown]> =
    Symbol.iterator in (headers as object)
      ? (headers as Iterable<[string, string]>)
      : Object.entries(headers as Record<string, unknown>);
  for (const [k, v] of entries) {
    if (k.toLowerCase() === name) {
      return Array.isArray(v) ? String(v[0]) : v === undefined ? undefined : String(v);
    }
  }
  return undefined;
}

function key(secret: string): Buffer {
  if (!secret.startsWith("whsec_")) {
    throw new DelayqError("invalid_signature", "a secret looks like whsec_<base64>", { retryable: false });
  }
  return Buffer.from(secret.slice("whsec_".length), "base64");
}

/** The `webhook-signature` value one secret gives (what the pusher sends). */
export function signWebhook(secret: string, id: string, timestamp: number, body: Uint8Array | string): string {
  const mac = createHmac("sha256", key(secret));
  mac.update(`${id}.${timestamp}.`);
  mac.update(typeof body === "string" ? Buffer.from(body) : body);
  return "v1," + mac.digest("base64");
}

/** Where a verified request came from. */
export interface VerifyOptions {
  /** Seconds since the epoch to check the timestamp against (default: now). */
  now?: number;
  /** Seconds of tolerance (default 300). */
  toleranceS?: number;
}

/** A push request whose signature checked out. */
export interface WebhookMessage<T = unknown> {
  /** Its `webhook-id`: the job id, the same on every retry — the key to deduplicate on. */
  id: string;
  /** When it was signed (`webhook-timestamp`, seconds since the epoch). */
  timestamp: number;
  /** The body parsed as JSON, or the raw bytes when it is not JSON. */
  payload: T;
}

/**
 * Checks a push request and answers the verified message: its id, timestamp and payload.
 * `secretOrSecrets`: one `whsec_…` or several during a rotation; `rawBody`: the bytes as
 * received, before any parsing. Throws a `DelayqError` with code `invalid_signature`.
 */
export function verifyWebhook<T = unknown>(
  secretOrSecrets: string | string[],
  headers: HeaderBag,
  rawBody: Uint8Array | string,
  opts: VerifyOptions = {},
): WebhookMessage<T> {
  const bad = (m: string) => new DelayqError("invalid_signature", m, { retryable: false });
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const sigs = header(headers, "webhook-signature");
  if (!id || !ts || !sigs) throw bad("missing webhook-id, webhook-timestamp or webhook-signature");
  if (!/^\d+$/.test(ts.trim())) throw bad("webhook-timestamp is not a number");
  const t = Number(ts.trim());
  const now = opts.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - t) > (opts.toleranceS ?? DEFAULT_TOLERANCE_S)) {
    throw bad("webhook-timestamp is too old or in the future");
  }
  const body = typeof rawBody === "string" ? Buffer.from(rawBody) : Buffer.from(rawBody);
  const secrets = Array.isArray(secretOrSecrets) ? secretOrSecrets : [secretOrSecrets];
  const wanted = secrets.map((s) => Buffer.from(signWebhook(s, id, t, body)));
  const ok = sigs.split(/\s+/).some((given) => {
    const g = Buffer.from(given);
    return wanted.some((w) => w.length === g.length && timingSafeEqual(w, g));
  });
  if (!ok) throw bad("no signature matches");
  const text = body.toString("utf8");
  let payload: unknown;
  try {
    payload = JSON.parse(text);
  } catch {
    payload = new Uint8Array(body);
  }
  return { id, timestamp: t, payload: payload as T };
}
