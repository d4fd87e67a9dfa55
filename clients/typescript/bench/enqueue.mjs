// The client enqueue benchmark (docs/BENCHMARKS.md, "Clients"): N enqueues awaited one by one
// (one connection's worth: the next is sent when the last answered), due in an hour; prints
// jobs/s as JSON.
//   node bench/enqueue.mjs URL [jobs]
import { Client } from "../build/src/index.js";

const [url, n = "5000"] = process.argv.slice(2);
const jobs = Number(n);
const queue = `enqueue-ts-${process.pid}`;
const client = new Client({ baseUrl: url });
const pad = "x".repeat(39);
await client.enqueue(queue, { warm: true }, { delayMs: 3_600_000 });
const start = process.hrtime.bigint();
for (let i = 0; i < jobs; i++) {
  await client.enqueue(queue, { orderId: i, action: "cancel", pad }, { delayMs: 3_600_000 });
}
const s = Number(process.hrtime.bigint() - start) / 1e9;
console.log(JSON.stringify({ client: "typescript", jobs, seconds: s, jobs_per_s: Math.round(jobs / s) }));
