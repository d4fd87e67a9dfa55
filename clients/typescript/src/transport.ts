// One HTTP request over Node's own http/https modules with keep-alive agents: the client's
// transport. (Node's global fetch costs ~0.5 ms more per request on a small machine:
// docs/BENCHMARKS.md, "The clients".)

import http from "node:http";
import https from "node:https";

const agents = {
  "http:": new http.Agent({ keepAlive: true, maxSockets: 256 }),
  "https:": new https.Agent({ keepAlive: true, maxSockets: 256 }),
};

/** What came back: the status, the body's text and its `Retry-After`. */
export interface Answer {
  status: number;
  text: string;
  retryAfter?: string;
}

/** Sends one request; rejects on a connection failure or when `signal` aborts it. */
export function send(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
  signal: AbortSignal,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const secure = url.protocol === "https:";
    if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
    const req = (secure ? https : http).request(
      url,
      { method, headers, agent: agents[secure ? "https:" : "http:"], signal },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const after = res.headers["retry-after"];
          resolve({
            status: res.statusCode ?? 0,
            text: Buffer.concat(chunks).toString("utf8"),
            retryAfter: Array.isArray(after) ? after[0] : after,
          });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}
