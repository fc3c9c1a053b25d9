# toolcage session driver for python tools (docs/sessions.md). Run as the tool's program in a
# session's sandbox, it keeps one interpreter for every call of the session: variables,
# imports and open files live on, like a notebook kernel.
#
# Requests come on stdin, one at a time, each a header line
#     TCS1 <nonce> <code bytes> <stdin bytes> <flags>\n
# followed by the code and then the call's stdin. The call's end is a marker the server looks
# for in the raw output: "\x1eTCS1 <nonce> <json>\n" on stdout (json: status, exit_code,
# result, error, figures) and "\x1eTCS1 <nonce>\n" on stderr. The nonce is the server's,
# new for each call. The code runs with stdin the call's own (a file), never the requests.
# An interrupt (SIGINT, the server's: a timeout or a cancel) raises KeyboardInterrupt in the
# code; between calls it is ignored.
import ast
import builtins
import io
import os
import signal
import sys
import traceback

_CTL = os.dup(0)  # the requests; the code's fd 0 is its call's stdin
os.set_inheritable(_CTL, False)
_NULL = os.open("/dev/null", os.O_RDONLY)
os.dup2(_NULL, 0)
_RESULT_MAX = 65536
_FIGURES_MAX = 16
_STDIN_FILE = "/tmp/.toolcage-stdin"


def _read_exact(n):
    parts = []
    while n > 0:
        b = os.read(_CTL, min(n, 1 << 20))
        if not b:
            sys.exit(0)
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


def _read_header():
    line = bytearray()
    while not line.endswith(b"\n"):
        b = os.read(_CTL, 1)
        if not b:
            sys.exit(0)  # the server closed the session
        line += b
        if len(line) > 256:
            sys.exit(2)
    f = line.decode("ascii").split()
    if len(f) != 5 or f[0] != "TCS1":
        sys.exit(2)
    return f[1], int(f[2]), int(f[3]), f[4]


def _figures():
    """Every open matplotlib figure as base64 PNG, then closed (output.plots)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    import base64

    out = []
    try:
        for num in plt.get_fignums():
            fig = plt.figure(num)
            if len(out) < _FIGURES_MAX:
                b = io.BytesIO()
                fig.savefig(b, format="png", dpi=100)
                out.append(base64.b64encode(b.getvalue()).decode("ascii"))
            plt.close(fig)
    except Exception as e:  # never the call's failure
        print("toolcage: a figure could not be saved: %s" % e, file=sys.stderr)
    return out


def _run(ns, code):
    """Run code in ns; the value of a final expression statement is the result."""
    tree = ast.parse(code, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), ns)
    if last is None:
        return None
    value = eval(compile(last, "<cell>", "eval"), ns)
    if value is not None:
        ns["_"] = value
        r = repr(value)
        return r if len(r) <= _RESULT_MAX else r[:_RESULT_MAX] + "..."
    return None


def _quiet(signum, frame):
    pass


def main():
    import json

    ns = {"__name__": "__main__", "__builtins__": builtins}
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/.matplotlib")
    os.environ.setdefault("XDG_CACHE_HOME", "/tmp/.cache")
    import warnings

    warnings.filterwarnings("ignore", message=".*non-interactive.*")
    while True:
        signal.signal(signal.SIGINT, _quiet)  # a late interrupt must not cut a request
        nonce, ncode, nstdin, flags = _read_header()
        code = _read_exact(ncode).decode("utf-8", "surrogateescape")
        data = _read_exact(nstdin)
        with open(_STDIN_FILE, "wb") as f:
            f.write(data)
        fd = os.open(_STDIN_FILE, os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
        os.unlink(_STDIN_FILE)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "rb", closefd=False))
        meta = {"status": "ok", "exit_code": 0, "result": None, "error": None}
        t0 = os.times()
        try:  # an interrupt that comes late (in a handler below) still ends the call only
            try:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                meta["result"] = _run(ns, code)
            except SystemExit as e:
                c = e.code
                meta["status"] = "exit"
                meta["exit_code"] = c if isinstance(c, int) else (0 if c is None else 1)
                if c is not None and not isinstance(c, int):
                    print(c, file=sys.stderr)
            except KeyboardInterrupt:
                meta["status"] = "interrupted"
                meta["exit_code"] = 130
                meta["error"] = "KeyboardInterrupt"
            except BaseException as e:
                tb = e.__traceback__
                while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
                    tb = tb.tb_next  # the traceback of the cell, without this file's frames
                traceback.print_exception(type(e), e, tb)
                meta["status"] = "error"
                meta["exit_code"] = 1
                meta["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()[:4096]
            finally:
                signal.signal(signal.SIGINT, _quiet)
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, _quiet)
            meta.update(status="interrupted", exit_code=130, error="KeyboardInterrupt")
        t1 = os.times()
        meta["cpu_ms"] = int(1000 * sum(t1[i] - t0[i] for i in range(4)))
        os.dup2(_NULL, 0)
        if "plots" in flags.split(","):
            meta["figures"] = _figures()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        mark = b"\x1eTCS1 " + nonce.encode("ascii")
        os.write(2, mark + b"\n")
        line = mark + b" " + json.dumps(meta).encode("utf-8") + b"\n"
        while line:
            line = line[os.write(1, line):]


main()
