# The code domain's judge driver, run in a fresh evaluation sandbox.
#
# It reads a JSON spec on stdin, runs the solution once per test in a forked
# child (no interpreter start-up per test) under CPU, memory and wall-clock
# limits, several tests at a time, and prints one JSON object with what
# each run did. It never sees an expected output: the plugin compares
# outside the sandbox, so a solution cannot read, patch or print its way to
# the expected answers.
#
# spec: {"mode": "stdio" | "function" | "literals", "solution": source,
#        "tests": [{"input": str} | {"call": python expression}],
#        "literals": [python literal expressions], "time_limit": seconds,
#        "memory_mb": int, "workers": int, "max_output": bytes}
import json
import os
from json import dumps as _dumps  # taken before any solution runs: patching json.dumps changes nothing
import resource
import select
import signal
import sys
import time


def main():
    spec = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    mode = spec["mode"]
    if mode == "literals":
        # Expected values written as Python literals (assert-style tests),
        # evaluated before any solution exists in this sandbox.
        import ast
        out = []
        for src in spec["literals"]:
            try:
                out.append({"ok": True, "value": ast.literal_eval(src)})
            except Exception as e:  # noqa: BLE001 - reported to the plugin
                out.append({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})
        print(json.dumps({"literals": out}, default=repr))
        return
    try:
        code = compile(spec["solution"], "solution.py", "exec")
    except (SyntaxError, ValueError) as e:
        print(json.dumps({"compile_error": "%s: %s" % (type(e).__name__, e)}))
        return
    tests = spec["tests"]
    limit = float(spec.get("time_limit", 2))
    mem = int(spec.get("memory_mb", 256)) << 20
    workers = max(1, int(spec.get("workers", os.cpu_count() or 1)))
    cap = int(spec.get("max_output", 1 << 16))
    results = [None] * len(tests)
    running = {}  # pid -> (index, out_fd, err_fd, start, chunks, errs)
    nxt = 0
    while nxt < len(tests) or running:
        while nxt < len(tests) and len(running) < workers:
            running.update(spawn(nxt, tests[nxt], mode, code, limit, mem))
            nxt += 1
        reap(running, results, limit, cap)
    print(json.dumps({"results": results}))


def spawn(i, test, mode, code, limit, mem):
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(in_w)
            os.close(out_r)
            os.close(err_r)
            os.dup2(in_r, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            # The function's value goes to stdout only once the call has
            # returned, after a mark; the plugin reads the last mark.
            cpu = int(limit) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            # Address space: the limit on top of what the interpreter already maps.
            base = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
            resource.setrlimit(resource.RLIMIT_AS, (base + mem, base + mem))
            sys.stdin = os.fdopen(0, "r")
            sys.stdout = os.fdopen(1, "w")
            sys.stderr = os.fdopen(2, "w")
            run_child(test, mode, code)
            sys.stdout.flush()
            os._exit(0)
        except SystemExit as e:
            try:
                sys.stdout.flush()
            except Exception:  # noqa: BLE001
                pass
            os._exit(e.code if isinstance(e.code, int) else (0 if e.code is None else 1))
        except MemoryError:
            os.write(2, b"\nMemoryError\n")
            os._exit(3)
        except BaseException as e:  # noqa: BLE001
            try:
                import traceback
                sys.stderr.write(traceback.format_exc()[-2000:])
                sys.stderr.flush()
            except BaseException:  # noqa: BLE001
                os.write(2, ("%s\n" % type(e).__name__).encode())
            os._exit(1)
    os.close(out_w)
    os.close(err_w)
    data = test.get("input", "").encode()
    if len(data) < 65536:
        # Fits in the pipe buffer: never blocks, even if the child does not
        # read; in_r is still open here, so a child that already left cannot
        # make the write fail.
        os.write(in_w, data)
        os.close(in_r)
    elif os.fork() == 0:
        # Larger inputs are fed by a helper, so the driver never waits on a
        # child that does not read its input.
        os.close(in_r)  # a child that leaves unread makes the write fail, not hang
        try:
            write_all(in_w, data)
        except OSError:
            pass
        os._exit(0)
    else:
        os.close(in_r)
    os.close(in_w)
    return {pid: [i, out_r, err_r, time.monotonic(), [], []]}


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def run_child(test, mode, code):
    if mode == "stdio":
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
        return
    ns = {"__name__": "solution", "__builtins__": __builtins__}
    exec(code, ns)
    try:
        result = eval(test["call"], ns)
    except SystemExit:
        # Leaving from inside the function is not returning a value.
        os.write(2, b"\nexited inside the function\n")
        os._exit(1)
    line = "\n" + RESULT_MARK + _dumps(result, default=repr) + "\n"
    sys.stdout.flush()
    write_all(1, line.encode())


RESULT_MARK = "\x00prorl-result\x00"


def reap(running, results, limit, cap):
    fds = {}
    for pid, st in running.items():
        for fd in (st[1], st[2]):
            if fd is not None:
                fds[fd] = (pid, fd == st[1])
    ready = []
    if fds:
        ready, _, _ = select.select(list(fds), [], [], 0.05)
    for fd in ready:
        pid, is_out = fds[fd]
        st = running[pid]
        chunk = os.read(fd, 65536)
        buf = st[4] if is_out else st[5]
        if chunk:
            if sum(len(c) for c in buf) <= cap + 65536:
                buf.append(chunk)
            continue
        os.close(fd)
        st[1 if is_out else 2] = None
    now = time.monotonic()
    for pid in list(running):
        st = running[pid]
        wpid, status = os.waitpid(pid, os.WNOHANG)
        timed_out = False
        if wpid == 0:
            if now - st[3] <= limit:
                continue
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            timed_out = True
        if st[1] is not None or st[2] is not None:
            # Drain what the child wrote before it ended.
            for k in (1, 2):
                fd = st[k]
                if fd is None:
                    continue
                while True:
                    r, _, _ = select.select([fd], [], [], 0)
                    if not r:
                        break
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    if sum(len(c) for c in st[3 + k]) <= cap + 65536:
                        st[3 + k].append(chunk)
                os.close(fd)
        out = b"".join(st[4])
        err = b"".join(st[5])
        res = {"time": round(now - st[3], 4), "timed_out": timed_out,
               "stdout": out[:cap].decode("utf-8", "replace"), "stdout_truncated": len(out) > cap,
               "stderr": err[-2000:].decode("utf-8", "replace")}
        if not timed_out:
            if os.WIFSIGNALED(status):
                res["signal"] = os.WTERMSIG(status)
            else:
                res["exit"] = os.WEXITSTATUS(status)
        results[st[0]] = res
        del running[pid]


if __name__ == "__main__":
    main()
