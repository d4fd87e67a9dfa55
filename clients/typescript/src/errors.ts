// Errors: every failure of a call is a DelayqError with the API's code, the HTTP status and
// whether sending the same request again may succeed.

/** Codes the client itself gives (the server's codes are listed in docs/API.md). */
export type ClientCode =
  | "connection_failed"
  | "timeout"
  | "aborted"
  | "invalid_signature"
  | "invalid_argument"
  | "bad_answer";

/** A failed call: `code` is the API's error code (`not_found`, `lease_lost`, …) or one of the client's own. */
export class DelayqError extends Error {
  /** The API's error code, or one of the client's own (`ClientCode`). */
  readonly code: string;
  /** The HTTP status (0 when no answer came). */
  readonly status: number;
  /** Whether the same request may succeed when sent again (no answer, 503, 507, 429). */
  readonly retryable: boolean;
  /** For a job found in another state than the action needs: that state. */
  readonly state?: string;
  /** Seconds the server asked to wait (`Retry-After`). */
  readonly retryAfterS?: number;

  constructor(
    code: string,
    message: string,
    opts: { status?: number; state?: string; retryAfterS?: number; retryable?: boolean } = {},
  ) {
    super(`${code}: ${message}`);
    this.name = "DelayqError";
    this.code = code;
    this.status = opts.status ?? 0;
    this.state = opts.state;
    this.retryAfterS = opts.retryAfterS;
    this.retryable =
      opts.retryable ??
      (this.status === 0 ||
        this.status === 503 ||
        this.status === 507 ||
        this.status === 429 ||
        code === "unavailable");
  }
}
