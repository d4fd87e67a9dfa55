// The order-timeout story: every new order gets a job that cancels it if it is still unpaid
// after a while; a payment cancels that job; a worker cancels the unpaid ones when their time
// comes.
//
//   node order-timeout.mjs http://127.0.0.1:7070 --orders 10 --pay 3 --timeout-ms 300
//
// Prints what happened as JSON and exits once every unpaid order is cancelled.

import { Client, Worker, DelayqError } from "delayq";

const [url = "http://127.0.0.1:7070", ...rest] = process.argv.slice(2);
const arg = (name, dflt) => {
  const i = rest.indexOf(`--${name}`);
  return i >= 0 ? Number(rest[i + 1]) : dflt;
};
const orders = arg("orders", 10);
const paid = arg("pay", 3);
const timeoutMs = arg("timeout-ms", 30 * 60 * 1000);
const queue = `order-timeouts-${process.pid}`;

const client = new Client({ baseUrl: url });

// On order creation: schedule its cancellation. The order id is the job id, so a retried
// request schedules one job.
for (let n = 0; n < orders; n++) {
  await client.enqueue(queue, { orderId: `order-${n}` }, { id: `order-${n}`, delayMs: timeoutMs, maxAttempts: 5 });
}

// On payment: the timeout must not fire any more.
const payments = {};
for (let n = 0; n < paid; n++) {
  const r = await client.cancel(queue, `order-${n}`);
  payments[`order-${n}`] = r === "cancelled" ? "timeout cancelled" : `too late (${r})`;
}

// The worker: cancel each unpaid order when its time comes.
const cancelled = [];
const worker = new Worker(
  client,
  queue,
  async (job) => {
    cancelled.push(job.payload.orderId);
    if (cancelled.length === orders - paid) setImmediate(() => worker.close());
  },
  { concurrency: 4 },
);
try {
  await worker.run();
} catch (e) {
  if (e instanceof DelayqError) console.error(`delayq said ${e.code} (${e.status})`);
  throw e;
}
console.log(JSON.stringify({ created: orders, payments, cancelled: cancelled.sort(), left: (await client.stats(queue)).scheduled }));
