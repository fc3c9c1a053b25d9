"""A client for toolcage's HTTP API (openapi/openapi.yaml), standard library only.

    from toolcage import Client
    tc = Client("http://127.0.0.1:8080", key)
    run = tc.execute("python", "print(6*7)")          # waits for the result
    run["stdout"]                                      # '42\\n'
    job = tc.submit("python", "import time; time.sleep(5)")  # 202 at once
    done = tc.wait(job["id"])                          # long-polls until it finishes
    for ev in tc.stream("python", "print(1)"):         # Server-Sent Events as it runs
        print(ev.event, ev.data)                       # execution, stdout..., result
    with tc.session("python") as s:                    # one interpreter for many calls
        s.run("import math\nx = 41")
        s.run("math.sqrt(x + 8)")["result"]            # '7.0'

Every refusal raises a ProblemError subclass named after its problem type
(ValidationError, UnknownTool, BlockedByPrescreen, Unavailable, ...), with the fields of the
RFC 9457 problem the server answered.
"""
from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Type, Union

__all__ = [
    "Client", "ToolcageError", "ProblemError", "ValidationError", "Unauthorized", "Forbidden",
    "NotFound", "UnknownTool", "Conflict", "LimitExceedsPolicy", "BlockedByPrescreen",
    "Overloaded", "QuotaExceeded", "Unavailable", "TransportError", "FINAL_STATUSES", "Event",
    "Session",
]

Json = Dict[str, Any]

#: Statuses an execution never leaves.
FINAL_STATUSES = frozenset(
    {"completed", "failed", "timeout", "killed", "error", "denied", "expired", "cancelled"})

_MAX_WAIT = 60  # the server's bound on ?wait=
_WAIT_RETRIES = 30  # wait(): 503s and transport errors in a row before it gives up (~1-2 min)


class Event:
    """One Server-Sent Event of an execution (docs/streaming.md): ``event`` (execution, held,
    approved, stdout, stderr, result, error), ``data`` (its JSON), ``id`` (the last event id
    seen, for re-attaching with :meth:`Client.events`)."""

    __slots__ = ("event", "data", "id")

    def __init__(self, event: str, data: Any, id: Optional[str]):
        self.event, self.data, self.id = event, data, id

    def __repr__(self) -> str:
        return f"Event({self.event!r}, id={self.id!r})"


class Session:
    """An open session (POST /v1/sessions): a sandbox that keeps its interpreter or shell
    between calls. A context manager: leaving the ``with`` block ends it."""

    def __init__(self, client: "Client", info: Json):
        self._client = client
        self.id: str = info["id"]
        self.info: Json = info

    def __repr__(self) -> str:
        return f"Session({self.id!r}, tool={self.info.get('tool')!r})"

    def run(self, code: str, *, stdin: Optional[str] = None,
            files: Optional[Sequence[Mapping[str, str]]] = None,
            timeout_ms: Optional[int] = None, cpu_ms: Optional[int] = None) -> Json:
        """Runs code in the session and returns its Execution (python: ``result`` is the
        repr of a final expression). files ([{path, content, encoding?}]) are written into
        the workspace first, and stay. A call past its time ends with status ``timeout``, one
        past its CPU (``cpu_ms``, the whole sandbox's) ``killed`` by ``cpu``; the session
        lives on unless the code would not be interrupted. A call held for a person's
        approval (a tool with ``session.held_calls: "hold"``) returns its HeldExecution
        (status ``pending_approval``): :meth:`Client.wait` gives its outcome."""
        body: Json = {"code": code}
        if stdin is not None:
            body["stdin"] = stdin
        if files is not None:
            body["files"] = list(files)
        if timeout_ms is not None:
            body["timeout_ms"] = timeout_ms
        if cpu_ms is not None:
            body["cpu_ms"] = cpu_ms
        path = f"/v1/sessions/{urllib.parse.quote(self.id)}/execute"
        t = None if timeout_ms is None else timeout_ms / 1000 + 30
        return self._client._request("POST", path, body=body, timeout=t)[1]

    def _file(self, path: str) -> str:
        return (f"/v1/sessions/{urllib.parse.quote(self.id)}/files/"
                f"{urllib.parse.quote(path, safe='/')}")

    def upload(self, path: str, data: Union[bytes, str]) -> Json:
        """Writes a file into the session's workspace (path relative to it; directories are
        made; an existing file is replaced). Returns {path, size, sha256}."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        return self._client._request("PUT", self._file(path), data=raw)[1]

    def download(self, path: str) -> bytes:
        """A file's bytes from the session's workspace, redacted like output (a binary file
        in which a rule matches raises ProblemError ``file-withheld``)."""
        return self._client._request("GET", self._file(path), binary=True)[1]

    def remove(self, path: str) -> None:
        """Deletes a file, symbolic link or empty directory in the session's workspace."""
        self._client._request("DELETE", self._file(path), binary=True)

    def files(self) -> List[Json]:
        """The workspace's entries [{path, type, size, mode, modified_at}], sorted by path."""
        return self._client._request(
            "GET", f"/v1/sessions/{urllib.parse.quote(self.id)}/files")[1]["files"]

    def refresh(self) -> Json:
        """The session as stored now (status, calls, ended_reason)."""
        self.info = self._client._request(
            "GET", f"/v1/sessions/{urllib.parse.quote(self.id)}")[1]
        return self.info

    def close(self) -> Json:
        """Ends the session (idempotent) and returns it."""
        self.info = self._client._request(
            "DELETE", f"/v1/sessions/{urllib.parse.quote(self.id)}")[1]
        return self.info

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.close()
        except NotFound:
            pass


class ToolcageError(Exception):
    """Anything this client raises."""


class TransportError(ToolcageError):
    """The server could not be reached, or answered something that is not the API."""


class ProblemError(ToolcageError):
    """An RFC 9457 problem: ``status``, ``type`` (the slug after ``urn:toolcage:problem:``),
    ``title``, ``detail``, ``errors`` (a list of {path, message}), ``request_id``,
    ``retry_after`` (seconds, for 429/503) and ``body`` (the whole problem)."""

    def __init__(self, status: int, body: Json, retry_after: Optional[int] = None):
        self.status = status
        self.body = body
        full = str(body.get("type", ""))
        self.type = full.rsplit(":", 1)[-1] if full else ""
        self.title = str(body.get("title", ""))
        self.detail = str(body.get("detail", ""))
        self.errors: List[Json] = list(body.get("errors") or [])
        self.request_id = body.get("request_id")
        self.retry_after = retry_after
        super().__init__(f"{status} {self.type}: {self.detail}")


class ValidationError(ProblemError):
    pass


class Unauthorized(ProblemError):
    pass


class Forbidden(ProblemError):
    pass


class NotFound(ProblemError):
    pass


class UnknownTool(NotFound):
    pass


class Conflict(ProblemError):
    pass


class LimitExceedsPolicy(ProblemError):
    pass


class BlockedByPrescreen(Forbidden):
    """The pre-screen refused the code; ``errors`` name each finding (path code:LINE:COL)."""


class Unavailable(ProblemError):
    """503: the server cannot serve this now (database away, draining, no image yet, too many
    sandboxes or streams); retry after ``retry_after``."""


class Overloaded(Unavailable):
    """503 ``overloaded``: too many sandboxes or event streams at this moment (an
    ``except Unavailable`` catches it too)."""


class QuotaExceeded(ProblemError):
    """The tenant has as many calls running as its quota allows; retry after ``retry_after``."""


_BY_TYPE: Dict[str, Type[ProblemError]] = {
    "validation": ValidationError, "invalid-json": ValidationError,
    "invalid-encoding": ValidationError, "bad-request": ValidationError,
    "unauthorized": Unauthorized, "forbidden": Forbidden, "not-found": NotFound,
    "unknown-tool": UnknownTool, "limit-exceeds-policy": LimitExceedsPolicy,
    "blocked-by-prescreen": BlockedByPrescreen, "overloaded": Overloaded,
    "unavailable": Unavailable, "draining": Unavailable, "image-unavailable": Unavailable,
    "quota-exceeded": QuotaExceeded,
    "idempotency-in-progress": Conflict, "not-pending": Conflict,
}
_BY_STATUS: Dict[int, Type[ProblemError]] = {
    400: ValidationError, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    422: ValidationError, 429: QuotaExceeded, 503: Unavailable,
}


def _problem(status: int, body: Json, retry_after: Optional[int]) -> ProblemError:
    slug = str(body.get("type", "")).rsplit(":", 1)[-1]
    cls = _BY_TYPE.get(slug) or _BY_STATUS.get(status) or ProblemError
    return cls(status, body, retry_after)


class Client:
    """One toolcage server and one API key. Thread-safe: every call is its own request."""

    def __init__(self, url: str, key: str, *, timeout: float = 120.0,
                 user_agent: str = "toolcage-python/0.1"):
        if not url.startswith(("http://", "https://")):
            raise ValueError("url must be http:// or https://")
        self.url = url.rstrip("/")
        self._key = key
        self.timeout = timeout
        self._ua = user_agent

    def __repr__(self) -> str:  # never the key
        return f"Client({self.url!r})"

    # ---- transport ----

    def _request(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                 body: Optional[Json] = None, headers: Optional[Mapping[str, str]] = None,
                 timeout: Optional[float] = None, data: Optional[bytes] = None,
                 binary: bool = False) -> "tuple[int, Any, Mapping[str, str]]":
        """One request: a JSON body, or data (bytes, sent as application/octet-stream). The
        answer parsed as JSON, or (binary) its bytes; a problem raises."""
        url = self.url + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        h = {"Authorization": f"Bearer {self._key}", "Accept": "application/json",
             "User-Agent": self._ua}
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            h["Content-Type"] = "application/json"
        elif data is not None:
            h["Content-Type"] = "application/octet-stream"
        h.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                status, raw, rh = resp.status, resp.read(), resp.headers
        except urllib.error.HTTPError as e:
            status, raw, rh = e.code, e.read(), e.headers
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise TransportError(f"{method} {path}: {e}") from e  # (IncompleteRead: cut short)
        if binary and status < 400:
            return status, raw, rh
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError as e:
            raise TransportError(f"{method} {path}: {status} with a body that is not JSON") from e
        if status >= 400:
            ra = rh.get("Retry-After")
            raise _problem(status, parsed if isinstance(parsed, dict) else {},
                           int(ra) if ra and ra.isdigit() else None)
        return status, parsed, rh

    def _events(self, method: str, path: str, *, body: Optional[Json] = None,
                headers: Optional[Mapping[str, str]] = None) -> Iterator[Event]:
        """The text/event-stream answer of method path, one Event at a time; a refusal raises
        its ProblemError (a JSON answer is yielded as one event named after nothing: "")."""
        h = {"Authorization": f"Bearer {self._key}", "Accept": "text/event-stream",
             "User-Agent": self._ua}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            resp = urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            raw, ra = e.read(), e.headers.get("Retry-After")
            try:
                parsed = json.loads(raw) if raw else {}
            except ValueError:
                parsed = {}
            raise _problem(e.code, parsed if isinstance(parsed, dict) else {},
                           int(ra) if ra and ra.isdigit() else None) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise TransportError(f"{method} {path}: {e}") from e
        with resp:
            if not resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                if resp.status == 202 or method != "POST":
                    yield Event("", json.loads(resp.read() or b"{}"), None)  # e.g. 202 async
                else:  # answered without events (too many streams open): the finished call
                    yield Event("result", json.loads(resp.read() or b"{}"), None)
                return
            name, lines, last, ended = "message", [], None, False
            try:
                for raw_line in resp:
                    line = raw_line.decode("utf-8").rstrip("\r\n")
                    if not line:
                        if lines:
                            ended = name in ("result", "error")
                            yield Event(name, json.loads("\n".join(lines)), last)
                        name, lines = "message", []
                        continue
                    if line.startswith(":"):
                        continue  # a heartbeat
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "event":
                        name = value
                    elif field == "data":
                        lines.append(value)
                    elif field == "id":
                        last = value
            except (OSError, ValueError, http.client.HTTPException) as e:  # IncompleteRead
                raise TransportError(f"{method} {path}: the event stream broke: {e}") from e
            if not ended:  # closed cleanly, but before its result: the call may run on
                raise TransportError(
                    f"{method} {path}: the event stream ended before its result (last event id "
                    f"{last!r}): re-attach with events(id, last_event_id), or wait(id)")

    # ---- executions ----

    @staticmethod
    def _execute_body(tool: str, code: str, stdin: Optional[str],
                      files: Optional[Sequence[Mapping[str, str]]],
                      limits: Optional[Mapping[str, int]], collect: Optional[Sequence[str]],
                      callback_url: Optional[str]) -> Json:
        body: Json = {"tool": tool, "code": code}
        for k, v in (("stdin", stdin), ("files", files), ("limits", limits),
                     ("collect", collect), ("callback_url", callback_url)):
            if v is not None:
                body[k] = list(v) if k in ("files", "collect") else (
                    dict(v) if k == "limits" else v)
        return body

    def execute(self, tool: str, code: str, *, stdin: Optional[str] = None,
                files: Optional[Sequence[Mapping[str, str]]] = None,
                limits: Optional[Mapping[str, int]] = None,
                collect: Optional[Sequence[str]] = None, callback_url: Optional[str] = None,
                idempotency_key: Optional[str] = None) -> Json:
        """Run one call and return the Execution when it has finished, or, for a call held
        for approval, the HeldExecution (status ``pending_approval``; see :meth:`wait`)."""
        body = self._execute_body(tool, code, stdin, files, limits, collect, callback_url)
        h = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._request("POST", "/v1/execute", body=body, headers=h,
                             timeout=self._call_timeout(limits))[1]

    # A synchronous call is answered after its run: up to its time limit, after a wait for a
    # sandbox slot (the server's TOOLCAGE_QUEUE_SECONDS, 60 s at most) and before its outcome
    # is stored (the server answers within 10 s, stored or not). A client that gave up sooner
    # would leave the call running without its answer, and invite a retry that runs it again.
    _CALL_MARGIN_S = 60 + 10 + 5

    def _call_timeout(self, limits: Optional[Mapping[str, int]]) -> Optional[float]:
        t = (limits or {}).get("timeout_ms")
        if not isinstance(t, int) or t <= 0:
            return None  # the tool's own limit, unknown here: the client's timeout
        return max(self.timeout, t / 1000 + self._CALL_MARGIN_S)

    def submit(self, tool: str, code: str, *, stdin: Optional[str] = None,
               files: Optional[Sequence[Mapping[str, str]]] = None,
               limits: Optional[Mapping[str, int]] = None,
               collect: Optional[Sequence[str]] = None, callback_url: Optional[str] = None,
               idempotency_key: Optional[str] = None) -> Json:
        """Start a call asynchronously (``Prefer: respond-async``); returns at once with its
        ``id`` and ``status`` (``running``, or ``pending_approval`` when held)."""
        body = self._execute_body(tool, code, stdin, files, limits, collect, callback_url)
        h = {"Prefer": "respond-async"}
        if idempotency_key:
            h["Idempotency-Key"] = idempotency_key
        return self._request("POST", "/v1/execute", body=body, headers=h)[1]

    def stream(self, tool: str, code: str, *, stdin: Optional[str] = None,
               files: Optional[Sequence[Mapping[str, str]]] = None,
               limits: Optional[Mapping[str, int]] = None,
               collect: Optional[Sequence[str]] = None, callback_url: Optional[str] = None,
               idempotency_key: Optional[str] = None,
               cancel_on_disconnect: bool = False) -> Iterator[Event]:
        """Run one call and yield its events as they come (``Accept: text/event-stream``):
        ``execution``, then ``stdout``/``stderr`` (``data["text"]``, already redacted), then
        ``result`` (the Execution). A held call yields ``held``, ``approved``, ``result``.
        Leaving the loop early does not stop the call (:meth:`events` re-attaches), unless
        ``cancel_on_disconnect``: then closing the iterator cancels it. A stream that breaks,
        or ends before ``result`` (or ``error``), raises TransportError: the call may still run
        (re-attach with :meth:`events` and the last event's ``id``, or :meth:`wait`)."""
        body = self._execute_body(tool, code, stdin, files, limits, collect, callback_url)
        if cancel_on_disconnect:
            body["cancel_on_disconnect"] = True
        h = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._stream(self._events("POST", "/v1/execute", body=body, headers=h))

    def _stream(self, it: Iterator[Event]) -> Iterator[Event]:
        for ev in it:
            if ev.event == "" and isinstance(ev.data, dict) and isinstance(ev.data.get("id"), str):
                # a repeat with the first call's Idempotency-Key is answered with the first
                # answer as it was stored (202, the execution): its events are the execution's
                it.close()
                yield from self.events(ev.data["id"])
                return
            yield ev

    def events(self, execution_id: str, last_event_id: Optional[str] = None) -> Iterator[Event]:
        """Re-attach to an execution's events, after ``last_event_id`` (an Event's ``id``)."""
        h = {"Last-Event-ID": last_event_id} if last_event_id else None
        return self._events("GET", f"/v1/executions/{urllib.parse.quote(execution_id)}/events",
                            headers=h)

    def get(self, execution_id: str) -> Json:
        """The stored execution (any status)."""
        return self._request("GET", f"/v1/executions/{urllib.parse.quote(execution_id)}")[1]

    def receipt(self, execution_id: str) -> Json:
        """The signed receipt of a finished execution ({statement, signature}; see
        docs/audit.md, "Receipts"): check it offline with ``toolcage receipt verify``."""
        return self._request(
            "GET", f"/v1/executions/{urllib.parse.quote(execution_id)}/receipt")[1]

    def wait(self, execution_id: str, timeout: Optional[float] = None) -> Json:
        """Long-poll until the execution is final, or ``timeout`` seconds have passed (then
        its current state). A held call waits for the reviewer and the run. A 503 or a lost
        connection (a server restarting, the database away for a moment) is asked again,
        after its ``Retry-After`` (1-5 s), within ``timeout``, up to 30 times in a row."""
        deadline = None if timeout is None else time.monotonic() + timeout
        path = f"/v1/executions/{urllib.parse.quote(execution_id)}"
        failures = 0
        while True:
            left = _MAX_WAIT if deadline is None else max(0, deadline - time.monotonic())
            w = min(_MAX_WAIT, int(left + 0.999))
            try:
                e = self._request("GET", path, query={"wait": w}, timeout=w + 30)[1]
            except (Unavailable, TransportError) as err:
                # a replica restarting or draining, the database away for a moment: the call
                # runs on, and asking again is safe (a read); within the deadline, a few times
                failures += 1
                pause = min(float(getattr(err, "retry_after", None) or 1), 5.0)
                if failures > _WAIT_RETRIES or (
                        deadline is not None and time.monotonic() + pause >= deadline):
                    raise
                time.sleep(pause)
                continue
            failures = 0
            if e.get("status") in FINAL_STATUSES or w == 0 or (
                    deadline is not None and time.monotonic() >= deadline):
                return e

    def cancel(self, execution_id: str) -> Json:
        return self._request(
            "POST", f"/v1/executions/{urllib.parse.quote(execution_id)}/cancel")[1]

    def executions(self, *, status: Optional[str] = None, tool: Optional[str] = None,
                   since: Optional[str] = None, page_size: int = 100) -> Iterator[Json]:
        """The tenant's executions, newest first, following the cursor page by page."""
        cursor = None
        while True:
            page = self._request("GET", "/v1/executions", query={
                "status": status, "tool": tool, "since": since, "cursor": cursor,
                "limit": page_size})[1]
            yield from page["executions"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    # ---- sessions ----

    def session(self, tool: str, *, ttl_seconds: Optional[int] = None,
                idle_timeout_seconds: Optional[int] = None,
                limits: Optional[Mapping[str, int]] = None) -> Session:
        """Opens a session of a tool whose policy allows them."""
        body: Json = {"tool": tool}
        if ttl_seconds is not None:
            body["ttl_seconds"] = ttl_seconds
        if idle_timeout_seconds is not None:
            body["idle_timeout_seconds"] = idle_timeout_seconds
        if limits:
            body["limits"] = dict(limits)
        return Session(self, self._request("POST", "/v1/sessions", body=body)[1])

    def sessions(self, *, status: Optional[str] = None) -> List[Json]:
        """The tenant's sessions, newest first (``status`` ``active`` or ``ended``)."""
        return self._request("GET", "/v1/sessions", query={"status": status})[1]["items"]

    def prescreen(self, tool: str, code: str, *, stdin: Optional[str] = None) -> Json:
        return self._request("POST", "/v1/prescreen",
                             body=self._execute_body(tool, code, stdin, None, None, None, None))[1]

    def quota(self) -> Json:
        """The tenant's quota and what it uses now."""
        return self._request("GET", "/v1/quota")[1]

    def tools(self, format: Optional[str] = None) -> List[Json]:
        """The policy's tools; ``format`` ``openai`` or ``anthropic`` gives definitions to
        hand to a model."""
        return self._request("GET", "/v1/tools", query={"format": format})[1]["tools"]

    # ---- approvals (reviewer and admin keys) ----

    def approvals(self, *, status: Optional[str] = "pending",
                  tool: Optional[str] = None) -> Iterator[Json]:
        cursor = None
        while True:
            page = self._request("GET", "/v1/approvals", query={
                "status": status, "tool": tool, "cursor": cursor, "limit": 200})[1]
            yield from page["approvals"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def approval(self, approval_id: str) -> Json:
        return self._request("GET", f"/v1/approvals/{urllib.parse.quote(approval_id)}")[1]

    def approve(self, approval_id: str, reason: Optional[str] = None) -> Json:
        body = {"reason": reason} if reason else {}
        return self._request(
            "POST", f"/v1/approvals/{urllib.parse.quote(approval_id)}/approve", body=body)[1]

    def deny(self, approval_id: str, reason: str) -> Json:
        return self._request("POST", f"/v1/approvals/{urllib.parse.quote(approval_id)}/deny",
                             body={"reason": reason})[1]

    # ---- egress asks (reviewer and admin keys): connections held for an answer ----

    def egress_asks(self, *, status: Optional[str] = "pending", limit: int = 200) -> list:
        """The tenant's egress asks, newest first (docs/approvals.md, "Ask on egress")."""
        return self._request("GET", "/v1/egress-asks",
                             query={"status": status, "limit": limit})[1]["egress_asks"]

    def egress_ask(self, ask_id: str) -> Json:
        return self._request("GET", f"/v1/egress-asks/{urllib.parse.quote(ask_id)}")[1]

    def decide_egress_ask(self, ask_id: str, decision: str,
                          reason: Optional[str] = None) -> Json:
        """``decision``: "allow_once", "allow_execution" or "deny" (a deny needs a reason)."""
        body = {"decision": decision}
        if reason:
            body["reason"] = reason
        return self._request(
            "POST", f"/v1/egress-asks/{urllib.parse.quote(ask_id)}/decision", body=body)[1]
