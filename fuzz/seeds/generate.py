#!/usr/bin/env python3
"""Writes the binary and wrapped seeds of fuzz/seeds/{nri_ttrpc,http_response,extender}/.

Run from the repository root: python3 fuzz/seeds/generate.py. The NRI seeds are the exchanges of
nri-plugin/tests/connection_test.cc (RawPeerTest) as byte streams; the HTTP seeds wrap
kube/tests/testdata objects in the API server's answers (sized, chunked, until close, watch
streams, Status errors, Retry-After, interim 1xx); the extender seeds are the scheduler's bodies
of allocator/extender/tests.
"""
import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEEDS = os.path.join(ROOT, "fuzz", "seeds")


def write(target, name, data):
    os.makedirs(os.path.join(SEEDS, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(SEEDS, target, name), "wb") as f:
        f.write(data)


# ---- protobuf, just what ttrpc's Request and Response need ----
def varint(n):
    out = b""
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field_bytes(num, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(num << 3 | 2) + varint(len(data)) + data


def field_varint(num, value):
    return varint(num << 3) + varint(value)


def request(service, method, payload=b"", timeout_nano=0):
    out = field_bytes(1, service) + field_bytes(2, method) + field_bytes(3, payload)
    if timeout_nano:
        out += field_varint(4, timeout_nano)
    return out


def response(code=0, message="", payload=b""):
    status = (field_varint(1, code) if code else b"") + (field_bytes(2, message) if message else b"")
    return field_bytes(1, status) + (field_bytes(2, payload) if payload else b"")


def ttrpc(stream, mtype, data, flags=0):
    return struct.pack(">IIBB", len(data), stream, mtype, flags) + data


def mux(conn, payload):
    return struct.pack(">II", conn, len(payload)) + payload


PLUGIN = "nri.pkg.api.v1alpha1.Plugin"


def nri_seeds():
    # Header byte: bit 0 role (0 plugin), bit 1 a call in flight, bits 2-7 the split size.
    configure = mux(1, ttrpc(1, 1, request(PLUGIN, "Configure", b"config", 5_000_000_000)))
    write("nri_ttrpc", "configure", b"\x00" + configure)
    write("nri_ttrpc", "configure-split", b"\x0c" + configure)
    noise = (mux(9, b"frames for unknown connections are dropped") +
             mux(2, ttrpc(77, 3, b"stray data")) + configure)
    write("nri_ttrpc", "noise-then-request", b"\x00" + noise)
    stream_rules = (mux(1, ttrpc(2, 1, request(PLUGIN, "Configure", b"a"))) +
                    mux(1, ttrpc(5, 1, request(PLUGIN, "Configure", b"a"))) +
                    mux(1, ttrpc(3, 1, request(PLUGIN, "Configure", b"a"))))
    write("nri_ttrpc", "stream-id-rules", b"\x00" + stream_rules)
    write("nri_ttrpc", "undecodable", b"\x00" + mux(1, ttrpc(1, 1, b"\xff\xff\xff")))
    write("nri_ttrpc", "unknown-method",
          b"\x00" + mux(1, ttrpc(1, 1, request(PLUGIN, "Nope"))) +
          mux(1, ttrpc(3, 1, request("other.Service", "Configure"))) +
          mux(1, ttrpc(5, 1, request(PLUGIN, "CreateContainer", b"x"))))
    oversized = struct.pack(">IIBB", (4 << 20) + 100, 1, 1, 0) + b"x" * 64
    write("nri_ttrpc", "oversized-request", b"\x00" + mux(1, oversized))
    write("nri_ttrpc", "oversized-mux-frame", b"\x00" + struct.pack(">II", 1, 0x7FFFFFFF))
    # A message of more than 4096 bytes travels as [4096 bytes] + [the rest], as Go writes it.
    big = ttrpc(1, 1, request(PLUGIN, "Configure", b"p" * 5000))
    write("nri_ttrpc", "two-frame-message", b"\x00" + mux(1, big[:4096]) + mux(1, big[4096:]))
    write("nri_ttrpc", "truncated", b"\x00" + configure[: len(configure) // 2])
    # Responses to the call in flight (stream 1 on the call connection).
    write("nri_ttrpc", "call-reply", b"\x02" + mux(2, ttrpc(1, 2, response(payload=b"ok"))))
    write("nri_ttrpc", "call-error",
          b"\x02" + mux(2, ttrpc(1, 2, response(code=5, message="not found"))))
    write("nri_ttrpc", "call-bad-reply", b"\x02" + mux(2, ttrpc(1, 2, b"\xff\xff")))
    write("nri_ttrpc", "runtime-role",
          b"\x03" + mux(1, ttrpc(1, 2, response(payload=b"ok"))) +
          mux(2, ttrpc(1, 1, request("nri.pkg.api.v1alpha1.Runtime", "RegisterPlugin", b"r"))))


def http_seeds():
    testdata = os.path.join(ROOT, "kube", "tests", "testdata")
    with open(os.path.join(testdata, "claim_v1.golden.json"), "rb") as f:
        claim = f.read()
    with open(os.path.join(testdata, "list.json"), "rb") as f:
        claim_list = f.read()

    def sized(body, code="200 OK", extra=""):
        return (f"HTTP/1.1 {code}\r\nContent-Type: application/json\r\n{extra}"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    def chunked(body, size=256):
        out = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        for i in range(0, len(body), size):
            piece = body[i:i + size]
            out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        return out + b"0\r\nX-Trailer: 1\r\n\r\n"

    write("http_response", "object-sized", sized(claim))
    write("http_response", "list-chunked", chunked(claim_list))
    write("http_response", "list-until-close",
          b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + claim_list)
    continued = json.loads(claim_list)
    continued["metadata"]["continue"] = "next-page"
    write("http_response", "list-continue", sized(json.dumps(continued).encode()))
    status = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                         "message": "resourceclaims \"claim\" not found", "reason": "NotFound",
                         "code": 404}).encode()
    write("http_response", "status-404", sized(status, "404 Not Found"))
    write("http_response", "throttled", sized(b"{}", "429 Too Many Requests", "Retry-After: 1\r\n"))
    write("http_response", "interim-100",
          b"HTTP/1.1 100 Continue\r\n\r\n" + sized(claim, extra="Connection: close\r\n"))
    events = []
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "default", "resourceVersion": "101"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    events.append({"type": "ADDED", "object": pod})
    events.append({"type": "MODIFIED", "object": dict(pod, metadata=dict(pod["metadata"],
                                                                          resourceVersion="102"))})
    events.append({"type": "BOOKMARK",
                   "object": {"kind": "Pod", "metadata": {"resourceVersion": "103"}}})
    events.append({"type": "DELETED", "object": pod})
    events.append({"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                               "reason": "Expired"}})
    stream = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    pod_list = json.dumps({"kind": "PodList", "apiVersion": "v1",
                           "metadata": {"resourceVersion": "100"}, "items": [pod]}).encode()
    # Before the marker: what list requests get; after it: what watch requests get.
    marker = b"\n\0WATCH\0\n"
    write("http_response", "watch-stream", sized(pod_list) + marker + chunked(stream, 97))
    write("http_response", "watch-until-close",
          sized(pod_list) + marker + b"HTTP/1.1 200 OK\r\n\r\n" + stream)


def extender_seeds():
    def pod(name, claims):
        return {"metadata": {"name": name, "namespace": "default", "uid": "uid-" + name},
                "spec": {"containers": [{"name": "c", "image": "busybox"}],
                         "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims]}}

    write("extender", "filter-node-names",
          json.dumps({"Pod": pod("p", ["two"]), "NodeNames": ["node-a", "node-b", "node-c",
                                                               "node-x"]}))
    write("extender", "filter-nodes",
          json.dumps({"Pod": pod("p", ["one"]),
                      "Nodes": {"items": [{"metadata": {"name": "node-a"}},
                                          {"metadata": {"name": "node-b"}}]}}))
    extended = pod("e", [])
    extended["spec"]["containers"][0]["resources"] = {"limits": {"example.com/gpu": "1"}}
    write("extender", "filter-extended-resource",
          json.dumps({"Pod": extended, "NodeNames": ["node-a"]}))
    write("extender", "bind",
          json.dumps({"PodName": "bound", "PodNamespace": "default", "PodUID": "uid-bound",
                      "Node": "node-a"}))
    write("extender", "bind-unknown",
          json.dumps({"PodName": "nobody", "PodNamespace": "default", "Node": "node-a"}))


if __name__ == "__main__":
    nri_seeds()
    http_seeds()
    extender_seeds()
