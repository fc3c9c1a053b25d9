#!/usr/bin/env python3
"""A minimal toolcage client using only the standard library.

    TOOLCAGE_URL=http://127.0.0.1:8080 TOOLCAGE_KEY=tc_... python3 examples/client.py

Runs a snippet, then a gated `deploy` call: it is held for approval (202), and the client
long-polls until a reviewer decides (approve it with the reviewer key, see docs/approvals.md).
"""
import json
import os
import urllib.error
import urllib.request

URL = os.environ.get("TOOLCAGE_URL", "http://127.0.0.1:8080")
KEY = os.environ["TOOLCAGE_KEY"]


def call(method, path, body=None, headers=None):
    req = urllib.request.Request(URL + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer " + KEY,
                                          "Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=90) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:  # problem+json: type, title, detail, errors
        return e.code, json.load(e)


status, result = call("POST", "/v1/execute", {"tool": "python", "code": "print(6*7)"})
print(status, result["status"], repr(result["stdout"]))

status, held = call("POST", "/v1/execute", {"tool": "deploy", "code": "echo deploying v2"},
                    headers={"Idempotency-Key": "deploy-v2"})
print(status, held["status"], "approval", held.get("approval_id"))
if status == 202:
    # Long-poll: returns as soon as the execution finishes, or after 60 s with its state.
    while True:
        status, ex = call("GET", f"/v1/executions/{held['id']}?wait=60")
        if ex["status"] not in ("pending_approval", "queued", "running"):
            break
    print(ex["status"], repr(ex["stdout"]), ex.get("error"))
