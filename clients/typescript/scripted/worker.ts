// The scripted worker of the shared worker scenarios (clients/conformance/workers.json): this
// package's Worker running the handler the job's payload scripts, printing one JSON line per
// start and end. Configured by DELAYQ_URL, DELAYQ_QUEUES, DELAYQ_LEASE_MS, DELAYQ_CONCURRENCY
// and DELAYQ_GATES; stops gracefully on SIGTERM.

import { existsSync } from "node:fs";
import { join } from "node:path";

import { Client, DeadLetter, RetryIn, Worker, type Job } from "../src/index.js";

interface Script {
  do: "ok" | "fail" | "retry_in" | "dead" | "hold";
  result?: unknown;
  error?: string;
  ms?: number;
  gate?: string;
  then?: Script;
}

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const gates = env("DELAYQ_GATES");
const say = (line: object) => process.stdout.write(JSON.stringify(line) + "\n");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function perform(s: Script, job: Job): Promise<unknown> {
  switch (s.do) {
    case "ok":
      return s.result;
    case "fail":
      throw new Error(s.error ?? "failed");
    case "dead":
      throw new DeadLetter(s.error ?? "dead");
    case "retry_in":
      if (job.attempt > 1 && s.then) return perform(s.then, job);
      throw new RetryIn(s.ms ?? 1000);
    case "hold":
      while (!existsSync(join(gates, s.gate ?? "gate"))) {
        if (job.signal.aborted) {
          say({ aborted: job.id });
          throw job.signal.reason;
        }
        await sleep(10);
      }
      return s.then ? perform(s.then, job) : undefined;
  }
}

const queues = (JSON.parse(env("DELAYQ_QUEUES")) as [string, number][]).map(([name, weight]) => ({ name, weight }));
const worker = new Worker(
  new Client({ baseUrl: env("DELAYQ_URL") }),
  queues,
  async (job) => {
    say({ start: job.id, attempt: job.attempt, queue: job.queue });
    try {
      return await perform(job.payload as Script, job);
    } finally {
      say({ end: job.id });
    }
  },
  { concurrency: Number(env("DELAYQ_CONCURRENCY")), leaseMs: Number(env("DELAYQ_LEASE_MS")), waitMs: 1000, onError: () => undefined },
);
process.on("SIGTERM", () => void worker.close());
say({ ready: true });
await worker.run();
