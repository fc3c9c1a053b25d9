/** Statuses an execution never leaves. */
export const FINAL_STATUSES = new Set([
    'completed', 'failed', 'timeout', 'killed', 'error', 'denied', 'expired', 'cancelled',
]);
const MAX_WAIT = 60; // the server's bound on ?wait=
const WAIT_RETRIES = 30; // wait(): 503s and transport errors in a row before it gives up (~1-2 min)
/** Anything the client throws. */
export class ToolcageError extends Error {
}
/** The server could not be reached, or answered something that is not the API. */
export class TransportError extends ToolcageError {
}
/**
 * An RFC 9457 problem the server answered. `type` is the slug after
 * `urn:toolcage:problem:` (`validation`, `unknown-tool`, `blocked-by-prescreen`, ...): switch
 * on it. `errors` names each field or finding; `retryAfter` is set for 429 and 503.
 */
export class ProblemError extends ToolcageError {
    status;
    type;
    title;
    detail;
    errors;
    requestId;
    retryAfter;
    problem;
    constructor(status, problem, retryAfter) {
        const type = String(problem.type ?? '').split(':').pop() ?? '';
        super(`${status} ${type}: ${problem.detail ?? ''}`);
        this.name = 'ProblemError';
        this.status = status;
        this.type = type;
        this.title = problem.title ?? '';
        this.detail = problem.detail ?? '';
        this.errors = (problem.errors ?? []);
        this.requestId = problem.request_id;
        this.retryAfter = retryAfter;
        this.problem = problem;
    }
}
export class Client {
    url;
    #key;
    #timeoutMs;
    #fetch;
    constructor(url, key, options = {}) {
        if (!/^https?:\/\//.test(url))
            throw new TypeError('url must be http:// or https://');
        this.url = url.replace(/\/+$/, '');
        this.#key = key;
        this.#timeoutMs = options.timeoutMs ?? 120_000;
        this.#fetch = options.fetch ?? fetch;
    }
    /** Never the key. */
    toJSON() {
        return { url: this.url };
    }
    /** One request: a JSON body, or data (bytes, sent as application/octet-stream). The answer
     * parsed as JSON, or (binary) its bytes; a problem throws. */
    async #request(method, path, opts = {}) {
        let url = this.url + path;
        const q = Object.entries(opts.query ?? {}).filter(([, v]) => v !== undefined && v !== null);
        if (q.length)
            url += `?${new URLSearchParams(q.map(([k, v]) => [k, String(v)]))}`;
        const headers = { authorization: `Bearer ${this.#key}`, accept: 'application/json', ...opts.headers };
        if (opts.body !== undefined)
            headers['content-type'] = 'application/json';
        else if (opts.data !== undefined)
            headers['content-type'] = 'application/octet-stream';
        let res;
        let bytes;
        try {
            res = await this.#fetch(url, {
                method, headers,
                body: opts.body !== undefined ? JSON.stringify(opts.body) : opts.data,
                signal: AbortSignal.timeout(opts.timeoutMs ?? this.#timeoutMs),
            });
            bytes = new Uint8Array(await res.arrayBuffer());
        }
        catch (e) {
            throw new TransportError(`${method} ${path}: ${e.message}`, { cause: e });
        }
        if (opts.binary && res.status < 400)
            return bytes;
        const text = new TextDecoder().decode(bytes);
        let json;
        try {
            json = text ? JSON.parse(text) : {};
        }
        catch {
            throw new TransportError(`${method} ${path}: ${res.status} with a body that is not JSON`);
        }
        if (res.status >= 400) {
            const ra = res.headers.get('retry-after');
            throw new ProblemError(res.status, (json ?? {}), ra && /^\d+$/.test(ra) ? Number(ra) : undefined);
        }
        return json;
    }
    // ---- executions ----
    /** Runs one call; the Execution when it has finished, or the HeldExecution of a held call. */
    execute(req, opts = {}) {
        const headers = opts.idempotencyKey ? { 'idempotency-key': opts.idempotencyKey } : {};
        return this.#request('POST', '/v1/execute', { body: req, headers, timeoutMs: this.#callTimeoutMs(req.limits?.timeout_ms) });
    }
    /** A synchronous call is answered after its run: up to its time limit, after a wait for a
     * sandbox slot (the server's TOOLCAGE_QUEUE_SECONDS, 60 s at most) and before its outcome
     * is stored (the server answers within 10 s, stored or not). A client that gave up sooner
     * would leave the call running without its answer, and invite a retry that runs it again. */
    #callTimeoutMs(timeoutMs) {
        if (typeof timeoutMs !== 'number' || !(timeoutMs > 0))
            return undefined; // the tool's own limit: the client's timeout
        return Math.max(this.#timeoutMs, timeoutMs + (60 + 10 + 5) * 1000);
    }
    /** Starts a call asynchronously (`Prefer: respond-async`): its id at once. */
    submit(req, opts = {}) {
        const headers = { prefer: 'respond-async' };
        if (opts.idempotencyKey)
            headers['idempotency-key'] = opts.idempotencyKey;
        return this.#request('POST', '/v1/execute', { body: req, headers });
    }
    /** Runs one call and yields its events as they come (`Accept: text/event-stream`):
     * `execution`, `stdout`/`stderr` (already redacted), `result`; a held call `held`,
     * `approved`, `result`. Leaving the loop early does not stop the call (see `events()`). A
     * stream that breaks, or ends before `result` (or `error`), throws TransportError: the call
     * may still run (re-attach with `events()` and the last event's `id`, or `wait()`). */
    stream(req, opts = {}) {
        const headers = opts.idempotencyKey ? { 'idempotency-key': opts.idempotencyKey } : {};
        return this.#events('POST', '/v1/execute', { body: req, headers, signal: opts.signal });
    }
    /** Re-attaches to an execution's events, after `lastEventId` (a StreamEvent's `id`). */
    events(id, opts = {}) {
        const headers = opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {};
        return this.#events('GET', `/v1/executions/${encodeURIComponent(id)}/events`, { headers, signal: opts.signal });
    }
    async *#events(method, path, opts) {
        const headers = { authorization: `Bearer ${this.#key}`, accept: 'text/event-stream', ...opts.headers };
        if (opts.body !== undefined)
            headers['content-type'] = 'application/json';
        const ac = new AbortController();
        const abort = () => ac.abort();
        opts.signal?.addEventListener('abort', abort);
        let res;
        try {
            res = await this.#fetch(this.url + path, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), signal: ac.signal });
        }
        catch (e) {
            throw new TransportError(`${method} ${path}: ${e.message}`, { cause: e });
        }
        try {
            if (res.status >= 400 || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream') || !res.body) {
                const text = await res.text();
                let json = {};
                try {
                    json = text ? JSON.parse(text) : {};
                }
                catch {
                    throw new TransportError(`${method} ${path}: ${res.status} with a body that is neither JSON nor events`);
                }
                if (res.status >= 400) {
                    const ra = res.headers.get('retry-after');
                    throw new ProblemError(res.status, json, ra && /^\d+$/.test(ra) ? Number(ra) : undefined);
                }
                const id = json.id;
                if (method === 'POST' && res.status === 202 && typeof id === 'string') {
                    // a repeat with the first call's Idempotency-Key is answered with the first answer as
                    // it was stored (202, the execution): its events are the execution's
                    yield* this.events(id, { signal: opts.signal });
                    return;
                }
                if (method === 'POST' && res.status === 200 && typeof id === 'string') {
                    // answered without events (the server had too many streams open): the finished call
                    yield { event: 'result', data: json, id: null };
                    return;
                }
                throw new TransportError(`${method} ${path}: ${res.status} answered JSON, not events`);
            }
            const decoder = new TextDecoder();
            const reader = res.body.getReader();
            let buf = '';
            let name = 'message';
            let data = [];
            let last = null;
            let ended = false; // a result or an error event came: the stream is complete
            for (;;) {
                let chunk;
                try {
                    chunk = await reader.read();
                }
                catch (e) {
                    throw new TransportError(`${method} ${path}: the event stream broke: ${e.message}`, { cause: e });
                }
                if (chunk.done) {
                    // closed cleanly, but before its result: the call may run on
                    if (!ended)
                        throw new TransportError(`${method} ${path}: the event stream ended before its result (last event id ${JSON.stringify(last)}): re-attach with events(id, { lastEventId }), or wait(id)`);
                    return;
                }
                buf += decoder.decode(chunk.value, { stream: true });
                let nl;
                while ((nl = buf.indexOf('\n')) >= 0) {
                    const line = buf.slice(0, nl).replace(/\r$/, '');
                    buf = buf.slice(nl + 1);
                    if (line === '') {
                        if (data.length) {
                            ended = name === 'result' || name === 'error';
                            yield { event: name, data: JSON.parse(data.join('\n')), id: last };
                        }
                        name = 'message';
                        data = [];
                    }
                    else if (!line.startsWith(':')) {
                        const c = line.indexOf(':');
                        const field = c < 0 ? line : line.slice(0, c);
                        const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
                        if (field === 'event')
                            name = value;
                        else if (field === 'data')
                            data.push(value);
                        else if (field === 'id')
                            last = value;
                    }
                }
            }
        }
        finally {
            opts.signal?.removeEventListener('abort', abort);
            ac.abort(); // leaving the loop closes the connection; the call runs on
        }
    }
    get(id) {
        return this.#request('GET', `/v1/executions/${encodeURIComponent(id)}`);
    }
    /** The signed receipt of a finished execution (docs/audit.md, "Receipts"); check it
     * offline with `toolcage receipt verify`. */
    receipt(id) {
        return this.#request('GET', `/v1/executions/${encodeURIComponent(id)}/receipt`);
    }
    /** Long-polls until the execution is final or `timeoutMs` has passed (then its current state).
     * A 503 or a lost connection (a server restarting, the database away for a moment) is asked
     * again, after its `Retry-After` (1-5 s), within `timeoutMs`, up to 30 times in a row. */
    async wait(id, timeoutMs) {
        const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
        let failures = 0;
        for (;;) {
            const left = Math.max(0, deadline - Date.now());
            const w = Math.min(MAX_WAIT, Math.ceil(left / 1000));
            let e;
            try {
                e = await this.#request('GET', `/v1/executions/${encodeURIComponent(id)}`, { query: { wait: w }, timeoutMs: (w + 30) * 1000 });
            }
            catch (err) {
                // a replica restarting or draining, the database away for a moment: the call runs on,
                // and asking again is safe (a read); within the deadline, a few times
                const retryable = err instanceof TransportError || (err instanceof ProblemError && err.status === 503);
                const pauseMs = Math.min((err instanceof ProblemError && err.retryAfter) || 1, 5) * 1000;
                if (!retryable || ++failures > WAIT_RETRIES || Date.now() + pauseMs >= deadline)
                    throw err;
                await new Promise((r) => setTimeout(r, pauseMs));
                continue;
            }
            failures = 0;
            if (FINAL_STATUSES.has(e.status) || w === 0 || Date.now() >= deadline)
                return e;
        }
    }
    cancel(id) {
        return this.#request('POST', `/v1/executions/${encodeURIComponent(id)}/cancel`);
    }
    /** The tenant's executions, newest first, following the cursor page by page. */
    async *executions(filter = {}) {
        let cursor = null;
        do {
            const page = await this.#request('GET', '/v1/executions', {
                query: { status: filter.status, tool: filter.tool, since: filter.since, cursor, limit: filter.pageSize ?? 100 },
            });
            yield* page.executions;
            cursor = page.next_cursor;
        } while (cursor);
    }
    /** Opens a session (a sandbox that keeps its interpreter or shell between calls). */
    openSession(req) {
        return this.#request('POST', '/v1/sessions', { body: req });
    }
    /** Runs code in an open session; python: `result` is the repr of a final expression. */
    runInSession(id, req) {
        const timeoutMs = req.timeout_ms === undefined ? undefined : req.timeout_ms + 30_000;
        return this.#request('POST', `/v1/sessions/${encodeURIComponent(id)}/execute`, { body: req, timeoutMs });
    }
    session(id) {
        return this.#request('GET', `/v1/sessions/${encodeURIComponent(id)}`);
    }
    /** Ends a session (idempotent) and returns it. */
    closeSession(id) {
        return this.#request('DELETE', `/v1/sessions/${encodeURIComponent(id)}`);
    }
    #sessionFile(id, path) {
        return `/v1/sessions/${encodeURIComponent(id)}/files/${path.split('/').map(encodeURIComponent).join('/')}`;
    }
    /** Writes a file into a session's workspace (directories are made, a file replaced). */
    uploadToSession(id, path, data) {
        const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
        return this.#request('PUT', this.#sessionFile(id, path), { data: bytes });
    }
    /** A file's bytes from a session's workspace, redacted like output (a binary file in which
     * a rule matches throws ProblemError `file-withheld`). */
    downloadFromSession(id, path) {
        return this.#request('GET', this.#sessionFile(id, path), { binary: true });
    }
    /** Deletes a file, symbolic link or empty directory in a session's workspace. */
    async removeFromSession(id, path) {
        await this.#request('DELETE', this.#sessionFile(id, path), { binary: true });
    }
    /** A session's workspace entries, sorted by path. */
    async sessionFiles(id) {
        const list = await this.#request('GET', `/v1/sessions/${encodeURIComponent(id)}/files`);
        return list.files;
    }
    /** The tenant's sessions, newest first. */
    async sessions(status) {
        const list = await this.#request('GET', '/v1/sessions', { query: { status } });
        return list.items;
    }
    /** The tenant's quota and what it uses now. */
    quota() {
        return this.#request('GET', '/v1/quota');
    }
    prescreen(req) {
        return this.#request('POST', '/v1/prescreen', { body: req });
    }
    /** The policy's tools; `openai` or `anthropic` gives definitions to hand to a model. */
    async tools(format) {
        return (await this.#request('GET', '/v1/tools', { query: { format } })).tools;
    }
    // ---- approvals (reviewer and admin keys) ----
    async *approvals(filter = { status: 'pending' }) {
        let cursor = null;
        do {
            const page = await this.#request('GET', '/v1/approvals', {
                query: { status: filter.status, tool: filter.tool, cursor, limit: 200 },
            });
            yield* page.approvals;
            cursor = page.next_cursor;
        } while (cursor);
    }
    approval(id) {
        return this.#request('GET', `/v1/approvals/${encodeURIComponent(id)}`);
    }
    approve(id, reason) {
        return this.#request('POST', `/v1/approvals/${encodeURIComponent(id)}/approve`, { body: reason ? { reason } : {} });
    }
    deny(id, reason) {
        return this.#request('POST', `/v1/approvals/${encodeURIComponent(id)}/deny`, { body: { reason } });
    }
    // ---- egress asks (reviewer and admin keys): connections held for an answer ----
    async egressAsks(filter = { status: 'pending' }) {
        const page = await this.#request('GET', '/v1/egress-asks', {
            query: { status: filter.status, limit: filter.limit ?? 200 },
        });
        return page.egress_asks;
    }
    egressAsk(id) {
        return this.#request('GET', `/v1/egress-asks/${encodeURIComponent(id)}`);
    }
    decideEgressAsk(id, decision, reason) {
        return this.#request('POST', `/v1/egress-asks/${encodeURIComponent(id)}/decision`, { body: reason ? { decision, reason } : { decision } });
    }
}
