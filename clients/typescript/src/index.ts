// delayq: the client and worker of a delayq server's HTTP API, and push webhook verification.

export { Client } from "./client.js";
export type { Ack, CallOptions, ClientOptions } from "./client.js";
export { DelayqError } from "./errors.js";
export type { ClientCode } from "./errors.js";
export { DEFAULT_TOLERANCE_S, signWebhook, verifyWebhook } from "./webhooks.js";
export type { HeaderBag, VerifyOptions, WebhookMessage } from "./webhooks.js";
export { DeadLetter, MAX_RESULT_BYTES, RetryIn, Worker } from "./worker.js";
export type { Handler, Job, WorkerOptions } from "./worker.js";
export type * from "./types.js";
export type * as wire from "./wire.js";
