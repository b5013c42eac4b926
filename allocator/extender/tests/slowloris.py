#!/usr/bin/env python3
"""Filter latency of devlet-extender beside N slowloris and N idle keep-alive connections.

usage: slowloris.py BINARY [N]   (N defaults to 16)

Runs BINARY --manifests on a copy of examples/cluster.yaml and examples/claims/one-gpu.yaml,
times 20 filters alone, then opens N idle keep-alive connections (half after a served request)
and N connections trickling header bytes every 100 ms, and times 20 filters on fresh connections
(5 s client timeout each).
"""
import json, os, shutil, socket, subprocess, sys, tempfile, threading, time, urllib.request

binary = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 16
root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
d = tempfile.mkdtemp()
shutil.copy(f"{root}/examples/cluster.yaml", d)
shutil.copy(f"{root}/examples/claims/one-gpu.yaml", d)
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
proc = subprocess.Popen([binary, "--manifests", d, "--mode", "allocate", "--bind-address",
                         "127.0.0.1", "--port", str(port), "--url-prefix", "/devlet"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
base = f"http://127.0.0.1:{port}"
body = json.dumps({"Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
                           "spec": {"containers": [{"name": "c", "image": "x"}],
                                    "resourceClaims": [{"name": "g", "resourceClaimName": "one-gpu"}]}},
                   "NodeNames": ["node-a", "node-b", "node-c"]}).encode()

def filter_once(timeout):
    t = time.monotonic()
    try:
        req = urllib.request.Request(base + "/devlet/filter", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            reply = json.load(r)
            assert reply.get("Error", "") == "", reply
    except Exception as e:
        return None, repr(e)
    return time.monotonic() - t, None

for _ in range(100):
    try:
        if urllib.request.urlopen(base + "/readyz", timeout=1).status == 200: break
    except Exception:
        time.sleep(0.1)
base_lat = sorted(filter_once(5)[0] for _ in range(20))
slow, idle = [], []
idle_unserved = 0
for i in range(n):
    c = socket.create_connection(("127.0.0.1", port))
    if i % 2 == 0:   # half idle after a served request, half never sent one
        c.sendall(b"POST /devlet/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        c.settimeout(5)
        try: c.recv(65536)
        except OSError: idle_unserved += 1
    idle.append(c)
for i in range(n):
    c = socket.create_connection(("127.0.0.1", port)); c.sendall(b"POST /devlet/filter HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    slow.append(c)
if idle_unserved: print(f"{idle_unserved} of the idle connections' first requests got no reply in 5 s")
stop = False
def trickle():
    while not stop:
        for c in slow:
            try: c.sendall(b"a")
            except OSError: pass
        time.sleep(0.1)
t = threading.Thread(target=trickle); t.start()
lat, failures = [], []
for _ in range(20):
    l, err = filter_once(5)
    if l is None: failures.append(err)
    else: lat.append(l)
stop = True; t.join()
proc.terminate(); proc.wait(10)
fmt = lambda v: "%.1f ms" % (v * 1e3)
print(f"alone: p50 {fmt(base_lat[10])} max {fmt(base_lat[-1])}")
if lat:
    lat.sort()
    print(f"beside {n} slowloris + {n} idle: {len(lat)}/20 answered, p50 {fmt(lat[len(lat)//2])} max {fmt(lat[-1])}")
print(f"beside {n} slowloris + {n} idle: {len(failures)}/20 failed (5 s client timeout)" + (f": {failures[0]}" if failures else ""))
