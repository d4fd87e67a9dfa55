#!/usr/bin/env python3
# Issue 44 probe: Redis commands/s of an idle `delayq serve` with 300 queues that once held a
# job, and which commands (10 s of MONITOR). Usage: scripts/probes/idle_queues.py PATH/TO/delayq
import json, socket, subprocess, time, http.client, tempfile, collections, sys
def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
rp, hp = free(), free()
d = tempfile.mkdtemp()
redis = subprocess.Popen(["redis-server", "--port", str(rp), "--save", "", "--appendonly", "no", "--dir", d], stdout=subprocess.DEVNULL)
time.sleep(0.5)
def rc(*a): return subprocess.run(["redis-cli", "-p", str(rp), *a], capture_output=True, text=True, errors="replace").stdout.strip()
serve = subprocess.Popen([sys.argv[1], "serve", "--redis", f"redis://127.0.0.1:{rp}", "--listen", f"127.0.0.1:{hp}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1.5)
def call(m, p, b=None):
    c = http.client.HTTPConnection("127.0.0.1", hp, timeout=60)
    c.request(m, p, body=json.dumps(b) if b is not None else None, headers={"content-type": "application/json"})
    r = c.getresponse(); r.read(); c.close(); return r.status
N = 300
for i in range(N):
    call("POST", f"/v1/queues/q{i}/jobs", {"id": "x", "payload": {}})
    call("DELETE", f"/v1/queues/q{i}/jobs/x")
time.sleep(12)
def total(): return int(rc("INFO", "stats").split("total_commands_processed:")[1].split()[0])
a = total(); time.sleep(30); b = total()
print(f"{N} idle queues: {(b - a - 2) / 30:.1f} commands/s")
mon = subprocess.Popen(["redis-cli", "-p", str(rp), "MONITOR"], stdout=subprocess.PIPE, text=True, errors="replace")
time.sleep(10); mon.terminate(); out = mon.communicate()[0]
cnt = collections.Counter()
for line in out.splitlines():
    parts = line.split('"')
    if len(parts) > 3:
        cmd = parts[1]
        # for scripts: the called command from inside a script shows with [0 lua]
        tag = "lua" if "lua]" in line else "top"
        arg = parts[3][:40] if len(parts) > 3 else ""
        key = (tag, cmd, arg.split(":")[-1] if ":" in arg else arg[:12])
        cnt[key] += 1
for k, v in cnt.most_common(15): print(v, k)
serve.terminate(); redis.terminate()
