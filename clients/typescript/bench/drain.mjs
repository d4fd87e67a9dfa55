// The client drain benchmark (docs/BENCHMARKS.md, "Clients"): enqueue N no-op jobs (not
// timed), then one Worker at concurrency C drains them; prints jobs/s as JSON.
//   node bench/drain.mjs URL [jobs] [concurrency]
import { Client, Worker } from "../build/src/index.js";

const [url, n = "20000", c = "16"] = process.argv.slice(2);
const jobs = Number(n);
const queue = `drain-ts-${process.pid}`;
const client = new Client({ baseUrl: url });
const pad = "x".repeat(39);
for (let i = 0; i < jobs; i += 1000) {
  const batch = [];
  for (let k = i; k < Math.min(jobs, i + 1000); k++) {
    const id = "1" + String(k).padStart(19, "0");
    batch.push({ id, payload: { orderId: id, action: "cancel", pad } });
  }
  await client.enqueueBatch(queue, batch);
}
let done = 0;
const start = process.hrtime.bigint();
const worker = new Worker(client, queue, async () => {
  if (++done === jobs) setImmediate(() => worker.close());
}, { concurrency: Number(c) });
await worker.run();
const s = Number(process.hrtime.bigint() - start) / 1e9;
const left = await client.stats(queue);
console.log(JSON.stringify({ client: "typescript", jobs, concurrency: Number(c), seconds: s, jobs_per_s: Math.round(jobs / s), left: left.scheduled + left.leased }));
