#!/usr/bin/env python3
# Issue 44 probe: a batch of 4,000 jobs with include_results, each acked with a 65,535-byte
# result over HTTP. Prints serve's RSS (idle, peak), Redis's used_memory peak, what the
# callback carried, and SLOWLOG entries over 5 ms. Usage: scripts/probes/batch_results.py PATH/TO/delayq
# 4,000 jobs in a batch with include_results, each acked with a 65,535-byte result:
# Redis's slowest command (SLOWLOG over 10 ms), Redis used_memory peak and serve's RSS.
import json, os, socket, subprocess, sys, time, http.client, tempfile
BIN = sys.argv[1]
def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
rp, hp = free(), free()
d = tempfile.mkdtemp()
redis = subprocess.Popen(["taskset", "-c", "0", "redis-server", "--port", str(rp), "--save", "", "--appendonly", "no", "--dir", d], stdout=subprocess.DEVNULL)
time.sleep(0.5)
def rc(*a): return subprocess.run(["redis-cli", "-p", str(rp), *a], capture_output=True, text=True, errors="replace").stdout.strip()
rc("CONFIG", "SET", "slowlog-log-slower-than", "5000"); rc("SLOWLOG", "RESET")
serve = subprocess.Popen(["taskset", "-c", "1", BIN, "serve", "--redis", f"redis://127.0.0.1:{rp}", "--listen", f"127.0.0.1:{hp}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1.5)
def rss(): return int([l for l in open(f"/proc/{serve.pid}/status") if l.startswith("VmRSS")][0].split()[1]) // 1024
def call(m, p, b=None):
    c = http.client.HTTPConnection("127.0.0.1", hp, timeout=60)
    c.request(m, p, body=json.dumps(b) if b is not None else None, headers={"content-type": "application/json"})
    r = c.getresponse(); data = r.read(); c.close()
    return r.status, (json.loads(data) if data else None)
idle = rss()
mem0 = int(rc("INFO", "memory").split("used_memory:")[1].split()[0])
N = 4000
s, v = call("POST", "/v1/queues/big/batches", {"id": "b", "jobs": [{"id": f"j{i}", "payload": {}} for i in range(N)], "on_complete": {"queue": "cb"}, "include_results": True})
assert s == 201, (s, v)
result = json.dumps("x" * 65533)
peak_rss = idle; done = 0
while done < N:
    s, v = call("POST", "/v1/queues/big/claim", {"max": 50})
    jobs = v["jobs"]
    if not jobs: time.sleep(0.05); continue
    body = '{"acks":[' + ",".join('{"id":%s,"lease_token":%d,"result":%s}' % (json.dumps(j["id"]), j["lease_token"], result) for j in jobs) + ']}'
    c = http.client.HTTPConnection("127.0.0.1", hp, timeout=60)
    c.request("POST", "/v1/queues/big/acks", body=body, headers={"content-type": "application/json"}); r = c.getresponse(); r.read(); c.close()
    assert r.status == 200, r.status
    done += len(jobs); peak_rss = max(peak_rss, rss())
t0 = time.time()
while call("GET", "/v1/queues/big/batches/b")[1]["state"] != "done":
    peak_rss = max(peak_rss, rss()); time.sleep(0.05)
    assert time.time() - t0 < 60
s, cbjob = call("GET", "/v1/queues/cb/jobs/batch-b-complete")
payload = cbjob["payload"]["batch"]
peak_mem = int(rc("INFO", "memory").split("used_memory_peak:")[1].split()[0])
print(f"serve RSS idle {idle} MiB, peak {peak_rss} MiB (+{peak_rss - idle})")
print(f"redis used_memory before {mem0/2**20:.1f} MiB, peak {peak_mem/2**20:.1f} MiB")
print(f"callback: {len(payload['results'])} results, results_left_out {payload.get('results_left_out')}")
print("slowlog (>5 ms):", rc("SLOWLOG", "LEN"))
print(rc("SLOWLOG", "GET", "500"))
serve.terminate(); redis.terminate()
