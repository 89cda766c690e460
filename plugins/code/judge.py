# The code domain's judge, run in a fresh evaluation sandbox as
# `python3 -I -c <this file> [runner]`.
#
# As the driver (no argument) it reads a JSON spec on stdin, compiles the
# solution once, runs it on every test under CPU, memory and wall-clock
# limits, several tests at a time, and prints one JSON object with what
# each run did.
#
# Three kinds of test:
#   stdio     the program reads the input and writes the answer; the
#             expected output never enters the sandbox (the plugin compares).
#   function  a Python call whose value the plugin compares with a JSON
#             expectation it keeps.
#   check     the dataset's own Python checks (asserts of any form, a
#             `check(candidate)` function, a pytest-style file). They run in
#             a checker process that holds the expected values; the solution
#             runs in a fresh interpreter (`runner`) that never saw them, and
#             every call crosses the process boundary as plain serialised
#             data. The solution cannot patch the checker, read its memory
#             (it is not dumpable) or decide an equality: whatever it returns
#             arrives as an int, a list, a str... compared by the checker.
#
# With spec mode "checker" it runs a special judge (testlib convention:
# `checker input output answer`, exit 0 accepted) on outputs the driver
# produced earlier; by then no solution process is left in the sandbox.
import base64
import builtins
import json
import os
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import types

_dumps = json.dumps  # taken before any solution runs
MAX_FRAME = 64 << 20
ITER_LIMIT = 1 << 20


def no_dump():
    # Not dumpable: processes of the same uid cannot ptrace this one or open
    # its /proc/<pid>/mem, fd or environ.
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:  # noqa: BLE001, S110 - best effort where ctypes is missing
        pass


# ---- the wire between the checker and the solution ------------------------


class Dead(BaseException):
    """The solution process went away: no test code may catch this."""


class Channel:
    def __init__(self, sock):
        self.sock = sock

    def send(self, obj):
        data = _dumps(obj, separators=(",", ":")).encode()
        self.sock.sendall(struct.pack(">I", len(data)) + data)

    def recv(self):
        head = self._exact(4)
        n = struct.unpack(">I", head)[0]
        if n > MAX_FRAME:
            raise Dead(f"frame of {n} bytes")
        return json.loads(self._exact(n))

    def _exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise Dead("the solution process ended")
            buf += chunk
        return bytes(buf)


class Unencodable(Exception):
    pass


def encode(v, objref, depth=0):
    """Plain data as tagged JSON. Dispatch is on the base types' own methods,
    so a subclass overriding __eq__, __iter__ or __repr__ still travels as
    its plain value. objref(v) names what is not plain data (a handle the
    other side can only pass back), or raises Unencodable."""
    if depth > 200:
        raise Unencodable("nested too deep")
    d = depth + 1
    if v is None:
        return ["n"]
    if v is True or v is False:
        return ["B", v]
    if isinstance(v, bool):
        return ["B", bool(int.__index__(v))]
    if isinstance(v, int):
        return ["i", int.__repr__(v)]
    if isinstance(v, float):
        return ["f", float.__repr__(v)]
    if isinstance(v, complex):
        return ["c", float.__repr__(complex.real.__get__(v)), float.__repr__(complex.imag.__get__(v))]
    if isinstance(v, str):
        return ["S", str.__str__(v)]
    if isinstance(v, (bytes, bytearray)):
        return ["b", base64.b64encode(bytes(v)).decode()]
    if isinstance(v, tuple):
        return ["t", [encode(x, objref, d) for x in tuple.__iter__(v)]]
    if isinstance(v, list):
        return ["l", [encode(x, objref, d) for x in list.__iter__(v)]]
    if isinstance(v, frozenset):
        return ["F", [encode(x, objref, d) for x in frozenset.__iter__(v)]]
    if isinstance(v, set):
        return ["s", [encode(x, objref, d) for x in set.__iter__(v)]]
    if isinstance(v, dict):
        return ["d", [[encode(k, objref, d), encode(x, objref, d)] for k, x in dict.items(v)]]
    if isinstance(v, range):
        return ["rg", v.start, v.stop, v.step]
    mod = type(v).__module__
    if mod == "decimal" and type(v).__name__ == "Decimal":
        return ["D", str(v)]
    if mod == "fractions" and type(v).__name__ == "Fraction":
        return ["Q", int.__repr__(v.numerator), int.__repr__(v.denominator)]
    if mod in ("pathlib", "posixpath") and hasattr(v, "as_posix"):
        return ["p", str(v.as_posix())]
    if isinstance(v, types.GeneratorType) or (hasattr(type(v), "__next__") and hasattr(type(v), "__iter__")):
        out = []
        for x in v:
            if len(out) >= ITER_LIMIT:
                raise Unencodable(f"iterator longer than {ITER_LIMIT}")
            out.append(encode(x, objref, d))
        return ["it", out]
    return objref(v, d)


def decode(t, local):
    """The inverse of encode. local(tag, payload) resolves handles and
    objects of user classes on this side."""
    tag = t[0]
    if tag == "n":
        return None
    if tag == "B":
        return bool(t[1])
    if tag == "i":
        return int(t[1])
    if tag == "f":
        return float(t[1])
    if tag == "c":
        return complex(float(t[1]), float(t[2]))
    if tag == "S":
        return str(t[1])
    if tag == "b":
        return base64.b64decode(t[1])
    if tag == "t":
        return tuple(decode(x, local) for x in t[1])
    if tag == "l":
        return [decode(x, local) for x in t[1]]
    if tag == "F":
        return frozenset(decode(x, local) for x in t[1])
    if tag == "s":
        return {decode(x, local) for x in t[1]}
    if tag == "d":
        return {decode(k, local): decode(x, local) for k, x in t[1]}
    if tag == "rg":
        return range(int(t[1]), int(t[2]), int(t[3]))
    if tag == "D":
        import decimal

        return decimal.Decimal(t[1])
    if tag == "Q":
        import fractions

        return fractions.Fraction(int(t[1]), int(t[2]))
    if tag == "p":
        import pathlib

        return pathlib.PosixPath(t[1])
    if tag == "it":
        return iter([decode(x, local) for x in t[1]])
    if tag in ("r", "o"):
        return local(t, decode)
    raise ValueError(f"unknown tag {tag!r}")


def user_classes(ns, module):
    return {k: v for k, v in ns.items() if isinstance(v, type) and v.__module__ == module}


def encode_object(v, d, classes, objref):
    # Objects of user classes (LeetCode's ListNode/TreeNode) travel by
    # structure when the other side has a class of that name.
    cls = type(v)
    if classes.get(cls.__name__) is cls and hasattr(v, "__dict__"):
        attrs = {k: encode(x, objref, d) for k, x in vars(v).items()}
        return ["o", cls.__name__, attrs]
    return None


# ---- the solution process --------------------------------------------------


def refuse(v, d):
    raise Unencodable(type(v).__name__)


def runner_main(fd):
    sock = socket.socket(fileno=fd)
    ch = Channel(sock)
    # Up: the test's clock starts now, not before the interpreter did.
    ch.send({"started": True})
    spec = ch.recv()
    mod = types.ModuleType("solution")
    ns = mod.__dict__
    sys.modules["solution"] = mod
    before = {}
    try:
        if spec.get("prelude"):
            exec(compile(spec["prelude"], "prelude.py", "exec"), ns)  # noqa: S102 - running the code is the point
            before = {k: id(v) for k, v in ns.items()}
        exec(compile(spec["solution"], "solution.py", "exec"), ns)  # noqa: S102 - running the code is the point
    except BaseException as e:  # noqa: BLE001 - the solution failed to load
        ch.send({"load_error": f"{type(e).__name__}: {str(e)[:1000]}", "syntax": isinstance(e, SyntaxError)})
        return
    handles = {}
    classes = user_classes(ns, "solution")

    def objref(v, d):
        o = encode_object(v, d, classes, objref)
        h = len(handles) + 1
        handles[h] = v
        if o is not None:
            o.append(h)
            return o
        return ["r", h]

    def local(t, dec):
        if t[0] == "r":
            if t[1] not in handles:
                raise ValueError("unknown handle")
            return handles[t[1]]
        cls = classes.get(t[1])
        if cls is None:
            raise TypeError(f"the solution has no class {t[1]} to receive an object")
        obj = cls.__new__(cls)
        obj.__dict__.update({k: dec(x, local) for k, x in t[2].items()})
        return obj

    names = {}
    for k, v in list(ns.items()):
        if k.startswith("__"):
            continue
        if before.get(k) == id(v):
            continue  # the prelude's, unchanged
        if isinstance(v, types.ModuleType):
            # What the solution imported, by name: the checker imports its
            # own copy (MBPP's and HumanEval's asserts run in the solution's
            # namespace and use them). Not a module the solution made up.
            if isinstance(v.__name__, str) and sys.modules.get(v.__name__) is v:
                names[k] = ["module", v.__name__]
            continue
        if callable(v) and getattr(v, "__module__", None) == "solution":
            names[k] = ["class" if isinstance(v, type) else "function"]
            continue
        imported = imported_name(v)
        if imported is not None:
            names[k] = ["import", *imported]
            continue
        try:
            names[k] = ["value", encode(v, refuse)]
        except Exception:  # noqa: BLE001, S110 - not plain data: left out
            pass
    ch.send({"names": names, "solution_class": "class Solution" in spec["solution"]})
    real_out, real_err = sys.stdout, sys.stderr
    cap = int(spec.get("max_output", 1 << 16))
    import io

    while True:
        try:
            req = ch.recv()
        except Dead:
            return
        out = io.StringIO()
        sys.stdout = out
        try:
            op = req["op"]
            if op == "call":
                target = ns[req["name"]] if "name" in req else local(["r", req["ref"]], decode)
                args = [decode(a, local) for a in req["args"]]
                kwargs = {k: decode(a, local) for k, a in req["kwargs"].items()}
                v = target(*args, **kwargs)
            else:
                obj = local(["r", req["ref"]], decode)
                if op == "getattr":
                    v = getattr(obj, req["name"])
                elif op == "len":
                    v = len(obj)
                elif op == "bool":
                    v = bool(obj)
                elif op == "iter":
                    v = iter(obj)
                elif op == "getitem":
                    v = obj[decode(req["key"], local)]
                elif op == "contains":
                    v = bool(decode(req["key"], local) in obj)
                elif op == "str":
                    v = str(obj)
                elif op == "repr":
                    v = repr(obj)
                else:
                    raise ValueError(f"unknown op {op!r}")
            resp = {"ok": encode(v, objref)}
        except BaseException as e:  # noqa: BLE001 - reported to the checker
            resp = {"exc": [type(e).__name__, str(e)[:2000]]}
        finally:
            sys.stdout = real_out
        text = out.getvalue()
        if text:
            resp["out"] = text[:cap]
        try:
            ch.send(resp)
        except Exception:  # noqa: BLE001 - the checker is gone
            return
        real_err.flush()


# ---- the checker process ---------------------------------------------------


class RemoteError(Exception):
    pass


class Remote:
    """The checker's side of the solution process."""

    def __init__(self, ch):
        self.ch = ch
        self.classes = {}

    def request(self, req):
        self.ch.send(req)
        resp = self.ch.recv()
        if "out" in resp:
            sys.stdout.write(resp["out"])
        if "exc" in resp:
            name, msg = resp["exc"]
            typ = getattr(builtins, name, None)
            if not (isinstance(typ, type) and issubclass(typ, Exception)) or name in ("StopIteration", "StopAsyncIteration"):
                typ = RemoteError
                msg = f"{name}: {msg}"
            e = typ(msg)
            e._prorl_remote = name
            raise e
        return self.decode(resp["ok"])

    def local(self, t, dec):
        if t[0] == "r":
            return Ref(self, t[1])
        cls = self.classes.get(t[1])
        if cls is None:
            return Ref(self, t[3])
        obj = cls.__new__(cls)
        obj.__dict__.update({k: dec(x, self.local) for k, x in t[2].items()})
        return obj

    def decode(self, t):
        return decode(t, self.local)

    def objref(self, v, d):
        if isinstance(v, Ref):
            return ["r", v._h]
        o = encode_object(v, d, self.classes, self.objref)
        if o is not None:
            return o
        raise Unencodable(f"cannot pass a {type(v).__name__} to the solution")

    def encode(self, v):
        return encode(v, self.objref)

    def call(self, target, args, kwargs):
        req = {"op": "call", "args": [self.encode(a) for a in args], "kwargs": {k: self.encode(a) for k, a in kwargs.items()}}
        req.update(target)
        return self.request(req)


class Ref:
    """Something of the solution's that is not plain data. It can be called,
    asked for attributes, iterated and passed back; it never compares equal
    to anything but itself, so an object cannot vouch for its own answer."""

    __slots__ = ("_h", "_r")

    def __init__(self, r, h):
        object.__setattr__(self, "_r", r)
        object.__setattr__(self, "_h", h)

    def __call__(self, *args, **kwargs):
        return self._r.call({"ref": self._h}, args, kwargs)

    def __getattr__(self, name):
        return self._r.request({"op": "getattr", "ref": self._h, "name": name})

    def __len__(self):
        return self._r.request({"op": "len", "ref": self._h})

    def __bool__(self):
        return self._r.request({"op": "bool", "ref": self._h}) is True

    def __iter__(self):
        return iter(self._r.request({"op": "iter", "ref": self._h}))

    def __getitem__(self, key):
        return self._r.request({"op": "getitem", "ref": self._h, "key": self._r.encode(key)})

    def __contains__(self, key):
        return self._r.request({"op": "contains", "ref": self._h, "key": self._r.encode(key)}) is True

    def __str__(self):
        return self._r.request({"op": "str", "ref": self._h})

    def __repr__(self):
        return self._r.request({"op": "repr", "ref": self._h})

    def __eq__(self, other):
        return isinstance(other, Ref) and other._h == self._h

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(("prorl-ref", self._h))


def named(r, name, kind):
    if kind == "class":

        def make(*args, **kwargs):
            return r.call({"name": name}, args, kwargs)

        make.__name__ = make.__qualname__ = name
        return make

    def fn(*args, **kwargs):
        return r.call({"name": name}, args, kwargs)

    fn.__name__ = fn.__qualname__ = name
    return fn


def imported_name(v):
    """(module, qualified name) of a function or class the solution imported
    from a module it did not write, when that name finds this very object."""
    mn, qn = getattr(v, "__module__", None), getattr(v, "__qualname__", None)
    if not callable(v) or not isinstance(mn, str) or not isinstance(qn, str) or mn in ("solution", "__main__", "__check__"):
        return None
    m = sys.modules.get(mn)
    obj = m
    for part in qn.split("."):
        obj = getattr(obj, part, None)
    return (mn, qn) if obj is v else None


def checker_import(desc):
    """The checker's own copy of a module, or of a function or class in one,
    that the solution imported: its values are computed here, so a solution
    that patched its copy changes nothing the checks read. None when this
    interpreter has no such module."""
    import importlib

    name = desc[0]
    if not isinstance(name, str) or not all(p.isidentifier() for p in name.split(".")) or name.split(".")[0] == "solution":
        return None
    try:
        obj = importlib.import_module(name)
        if len(desc) > 1:
            for part in str(desc[1]).split("."):
                obj = getattr(obj, part)
    except Exception:  # noqa: BLE001 - not importable here: the name is left out, as before
        return None
    return obj


def judging_call(src, own):
    """The name of a function of the solution's (own) that the checks call on
    the result of another of its functions, as a comparison would be
    called (isclose(f(x), y), sorted(f(x))); "" when none is."""
    import ast

    try:
        tree = ast.parse(src)
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in own):
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            for inner in ast.walk(arg):
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Name)
                    and inner.func.id in own
                    and inner.func.id != node.func.id
                ):
                    return node.func.id
    return ""


def checker_main(test, setup, sock, result_fd):
    no_dump()
    # What the solution prints during a call is replayed here: it must not
    # reach the driver's stdout, which carries the verdicts.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the process's own stdout
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    r = Remote(Channel(sock))
    result = {"passed": False}
    try:
        if r.ch.recv().get("started") is not True:
            raise Dead("the solution process did not start")
        os.write(result_fd, READY)
        hello = r.ch.recv()
        if "load_error" in hello:
            result.update(kind="syntax" if hello.get("syntax") else "load", error=hello["load_error"])
            return
        ns = {"__name__": "__check__", "__builtins__": builtins}
        mod = types.ModuleType("solution")
        for name, desc in hello["names"].items():
            if desc[0] in ("module", "import"):
                v = checker_import(desc[1:])
                if v is None:
                    continue
            else:
                v = named(r, name, desc[0]) if desc[0] != "value" else r.decode(desc[1])
            ns[name] = v
            setattr(mod, name, v)
        sys.modules["solution"] = mod
        if setup:
            exec(compile(setup, "setup.py", "exec"), ns)  # noqa: S102 - running the code is the point
        r.classes = user_classes(ns, "__check__")
        own = {n for n, d in hello["names"].items() if d[0] == "function"}
        judge = judging_call(test.get("check", "") + "\n" + test.get("then", ""), own)
        if judge:
            # A check that needs the solution's own function to compare the
            # solution's answer would let it grade itself (a solution that
            # defines isclose() returning True).
            raise AssertionError(f"the checks would compare with {judge}(), a function the solution defines: not trusted")
        if "pytest" in test:
            failed = run_pytest(test["pytest"], r)
            if failed:
                result.update(
                    kind=failed[0][1], error="; ".join(f"{n}: {e}" for n, _, e in failed)[:2000], failed=[n for n, _, _ in failed]
                )
                return
        else:
            exec(compile(test["check"], "check.py", "exec"), ns)  # noqa: S102 - running the code is the point
            r.classes = user_classes(ns, "__check__")
            if test.get("then"):
                if test.get("candidate"):
                    target = test["candidate"]
                    if target not in ns and hello.get("solution_class") and "Solution" in ns:
                        ns["candidate"] = getattr(ns["Solution"](), target)
                    else:
                        ns["candidate"] = ns[target]
                exec(compile(test["then"], "check.py", "exec"), ns)  # noqa: S102 - running the code is the point
        result = {"passed": True}
    except Dead as e:
        result.update(kind="dead", error=str(e))
    except BaseException as e:  # noqa: BLE001 - a failed check
        result.update(kind=classify(e), error=f"{type(e).__name__}: {str(e)[:1000]}")
    finally:
        sys.stdout.flush()
        os.write(result_fd, _dumps(result).encode())
        os._exit(0)


# The checker's first byte to the driver: the solution's interpreter is up.
READY = b"R"
# How long a solution's fresh interpreter may take to start (a loaded
# machine); the test's own time limit counts from then.
STARTUP_LIMIT = 60.0


def wall_limit(limit):
    """The time a test may take besides waiting for a CPU. The time limit
    is on CPU time (the solution's own, as competitive judges count it), so
    a verdict does not depend on how loaded the machine is; this backstop
    only ends a solution that waits instead of computing."""
    return 3 * limit + 2


def runq_wait(pid):
    """Seconds pid has spent runnable but waiting for a CPU (the kernel's
    schedstat; 0 when unknown). A loaded machine makes a test slow by this
    much, which its wall-clock backstop does not count."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def classify(e):
    if isinstance(e, AssertionError):
        return "assert"
    remote = getattr(e, "_prorl_remote", None)
    if remote == "MemoryError":
        return "memory"
    if remote:
        return "remote"
    return "error"


def run_pytest(src, r):
    """The tests of a pytest-style file: test_* functions and Test* classes'
    test_* methods, with parametrize marks, user fixtures (yield or return)
    and the capsys, capfd, tmp_path and tmpdir fixtures."""
    import inspect

    mod = types.ModuleType("test_solution")
    mod.__dict__["__builtins__"] = builtins
    sys.modules["test_solution"] = mod
    exec(compile(src, "test_solution.py", "exec"), mod.__dict__)  # noqa: S102 - running the code is the point
    r.classes = user_classes(mod.__dict__, "test_solution")
    fixtures = {}
    for k, v in mod.__dict__.items():
        if hasattr(v, "_pytestfixturefunction"):
            name = getattr(v._pytestfixturefunction, "name", None) or k
            fixtures[name] = getattr(getattr(v, "__pytest_wrapped__", None), "obj", v)
    items = []
    for k, v in list(mod.__dict__.items()):
        if k.startswith("test") and inspect.isfunction(v):
            items.append((k, v, None))
        elif k.startswith("Test") and isinstance(v, type) and "__init__" not in v.__dict__:
            for mk, mv in v.__dict__.items():
                if mk.startswith("test") and inspect.isfunction(mv):
                    items.append((f"{k}::{mk}", mv, v))
    if not items:
        raise AssertionError("no tests collected")
    failed = []
    for name, fn, cls in items:
        for params in expand(fn):
            label = name if not params else "{}[{}]".format(name, "-".join(map(str, params.values())))
            try:
                call_test(fn, cls, params, fixtures)
            except Dead:
                raise
            except BaseException as e:  # noqa: BLE001 - a failing test
                if type(e).__name__ == "Skipped":
                    continue
                failed.append((label, classify(e), f"{type(e).__name__}: {str(e)[:300]}"))
    return failed


def expand(fn):
    sets = [{}]
    for mark in getattr(fn, "pytestmark", []):
        if getattr(mark, "name", "") != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        rows = []
        for v in values:
            if type(v).__name__ == "ParameterSet":  # pytest.param(...)
                rows.append(dict(zip(names, v.values, strict=False)))
            elif len(names) == 1:
                rows.append({names[0]: v})
            else:
                rows.append(dict(zip(names, v, strict=False)))
        sets = [dict(s, **row) for s in sets for row in rows]
    return sets


class Capture:
    def __init__(self):
        import io

        self.io = io
        self.saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()

    def readouterr(self):
        out, err = sys.stdout.getvalue(), sys.stderr.getvalue()
        sys.stdout, sys.stderr = self.io.StringIO(), self.io.StringIO()
        return types.SimpleNamespace(out=out, err=err)

    def close(self):
        sys.stdout, sys.stderr = self.saved


def call_test(fn, cls, params, fixtures):
    import inspect

    cleanups = []
    cache = {}

    def fixture(name):
        if name in params:
            return params[name]
        if name in cache:
            return cache[name]
        if name in ("capsys", "capfd"):
            c = Capture()
            cleanups.append(c.close)
            v = c
        elif name in ("tmp_path", "tmpdir"):
            import pathlib

            v = pathlib.Path(tempfile.mkdtemp(prefix="prorl-test-"))
            cleanups.append(lambda p=v: shutil.rmtree(p, ignore_errors=True))
        elif name in fixtures:
            f = fixtures[name]
            v = f(**{p: fixture(p) for p in inspect.signature(f).parameters})
            if inspect.isgenerator(v):
                gen = v
                v = next(gen)
                cleanups.append(lambda g=gen: next(g, None))
        else:
            raise LookupError(f"fixture {name!r} not found")
        cache[name] = v
        return v

    try:
        target = fn
        sig = list(inspect.signature(fn).parameters)
        if cls is not None:
            inst = cls()
            if hasattr(inst, "setup_method"):
                inst.setup_method(fn)
            target = fn.__get__(inst)
            sig = sig[1:]
        target(**{p: fixture(p) for p in sig})
        if cls is not None and hasattr(inst, "teardown_method"):
            inst.teardown_method(fn)
    finally:
        for c in reversed(cleanups):
            c()


# ---- the driver --------------------------------------------------------------


def join_prompt(prompt, code):
    """A HumanEval answer after the prompt it completes: a body continues the
    prompt's last function, a whole program follows it (a later def replaces
    the prompt's). A prompt that does not compile with the answer (prose)
    is left out."""
    joined = prompt + code if code.startswith((" ", "\t")) else prompt + "\n" + code
    try:
        compile(joined, "solution.py", "exec")
        return joined
    except (SyntaxError, ValueError):
        return code


def main():
    no_dump()
    spec = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    if spec["mode"] == "checker":
        return run_checker_mode(spec)
    if spec.get("prompt"):
        spec["solution"] = join_prompt(spec["prompt"], spec["solution"])
    work = tempfile.mkdtemp(prefix="prorl-judge-")
    try:
        judge_all(spec, work)
    finally:
        # A sandbox that is not fresh for each judge (driver "none" shares
        # the host's /tmp) would keep one directory per evaluation.
        shutil.rmtree(work, ignore_errors=True)


def judge_all(spec, work):
    lang = spec.get("language", "python")
    limit = float(spec.get("time_limit", 2))
    mem = int(spec.get("memory_mb", 256)) << 20
    prog, err = build(lang, spec, work, mem)
    if err is not None:
        print(_dumps({"compile_error": err[-4000:]}))
        return
    tests = spec["tests"]
    workers = max(1, int(spec.get("workers", os.cpu_count() or 1)))
    cap = int(spec.get("max_output", 1 << 16))
    results = [None] * len(tests)
    running = {}
    nxt = 0
    while nxt < len(tests) or running:
        while nxt < len(tests) and len(running) < workers:
            running[nxt] = start(nxt, tests[nxt], spec, prog, limit, mem)
            nxt += 1
        reap(running, results, limit, cap)
    print(_dumps({"results": results}))


def build(lang, spec, work, mem):
    """The program to run: Python source (forked), or an argv. Compile errors
    are returned as text."""
    src = spec["solution"]
    if lang == "python":
        try:
            code = compile(spec.get("prelude", "") + "\n" + src, "solution.py", "exec")
        except (SyntaxError, ValueError) as e:
            return None, f"{type(e).__name__}: {e}"
        if spec.get("prelude") and spec["mode"] != "check":
            # The prelude's modules imported once here: every forked test
            # finds them loaded instead of importing them again.
            exec(compile(spec["prelude"], "prelude.py", "exec"), {})  # noqa: S102 - running the code is the point
        return {"code": code}, None
    limit_mb = mem >> 20
    if lang in ("cpp", "c"):
        ext, cc = (".cpp", ["g++", "-std=gnu++17"]) if lang == "cpp" else (".c", ["gcc", "-std=gnu11"])
        path = os.path.join(work, "main" + ext)
        with open(path, "w") as f:
            f.write(src)
        exe = os.path.join(work, "main")
        err = compile_step(cc + ["-O2", "-pipe", "-o", exe, path, "-lm"], work)
        return ({"argv": [exe]}, None) if err is None else (None, err)
    if lang == "java":
        import re

        m = re.search(r"public\s+(?:final\s+|abstract\s+)*class\s+([A-Za-z_$][\w$]*)", src)
        name = m.group(1) if m else "Main"
        with open(os.path.join(work, name + ".java"), "w") as f:
            f.write(src)
        err = compile_step(["javac", "-J-Xmx512m", "-J-XX:+UseSerialGC", "-encoding", "UTF-8", "-d", work, name + ".java"], work)
        argv = ["java", f"-Xmx{limit_mb}m", "-Xss64m", "-XX:+UseSerialGC", "-cp", work, name]
        return ({"argv": argv, "vm": True}, None) if err is None else (None, err)
    if lang == "javascript":
        path = os.path.join(work, "main.js")
        with open(path, "w") as f:
            f.write(src)
        err = compile_step(["node", "--check", path], work)
        argv = ["node", f"--max-old-space-size={limit_mb}", "--stack-size=65500", path]
        return ({"argv": argv, "vm": True}, None) if err is None else (None, err)
    return None, f"unsupported language {lang!r}"


def compile_step(argv, work):
    try:
        p = subprocess.run(
            argv, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False
        )
    except subprocess.TimeoutExpired:
        return "compilation took longer than 60 s"
    except OSError as e:
        return f"compiler not available: {e}"
    if p.returncode != 0:
        return p.stdout.decode("utf-8", "replace")
    return None


def limits(limit, mem, vm):
    cpu = int(limit) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if not vm:
        # Address space: the limit on top of what is already mapped. Virtual
        # machines (JVM, V8) reserve far more than they use: their own heap
        # flags and the sandbox's memory bound hold them instead.
        with open("/proc/self/statm") as f:
            base = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (base + mem, base + mem))
        stack = min(mem, 1 << 30)
        try:
            resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))
        except (ValueError, OSError):
            pass


def start(i, test, spec, prog, limit, mem):
    """Start test i; returns its state for reap()."""
    if spec["mode"] == "check":
        return start_check(test, spec, limit, mem)
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
            limits(limit, mem, prog.get("vm", False))
            os.closerange(3, 1 << 16)  # nothing of the other tests' pipes
            if "argv" in prog:
                os.execvp(prog["argv"][0], prog["argv"])
            sys.stdin = os.fdopen(0, "r")
            sys.stdout = os.fdopen(1, "w")
            sys.stderr = os.fdopen(2, "w")
            run_python(test, spec["mode"], prog["code"])
            sys.stdout.flush()
            os._exit(0)
        except SystemExit as e:
            try:
                sys.stdout.flush()
            except Exception:  # noqa: BLE001, S110
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
                os.write(2, (f"{type(e).__name__}\n").encode())
            os._exit(1)
    os.close(out_w)
    os.close(err_w)
    feed(in_r, in_w, test.get("input", "").encode())
    return {"pid": pid, "open": {out_r, err_r}, "data": {out_r: [], err_r: []}, "out": out_r, "err": err_r, "t0": time.monotonic()}


def feed(in_r, in_w, data):
    if len(data) < 65536:
        # Fits in the pipe buffer: never blocks, even if the child does not read.
        os.write(in_w, data)
        os.close(in_r)
    elif os.fork() == 0:
        # Larger inputs are fed by a helper, so the driver never waits on a
        # child that does not read its input.
        os.close(in_r)
        try:
            write_all(in_w, data)
        except OSError:
            pass
        os._exit(0)
    else:
        os.close(in_r)
    os.close(in_w)


def own_source():
    """This program's text, which it was started with: python3 -I -c <source>."""
    with open("/proc/self/cmdline", "rb") as f:
        args = f.read().split(b"\0")
    return args[args.index(b"-c") + 1].decode()


def start_check(test, spec, limit, mem):
    a, b = socket.socketpair()
    res_r, res_w = os.pipe()
    # Plain pipes, not subprocess.PIPE: reap() closes the fds itself, and a
    # file object of Popen's would close the same numbers again later.
    out, out_w = os.pipe()
    err, err_w = os.pipe()
    # The solution: a fresh interpreter, started before the checker exists;
    # it inherits only its socket.
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", own_source(), "runner", str(b.fileno())],
        stdin=subprocess.DEVNULL,
        stdout=out_w,
        stderr=err_w,
        pass_fds=(b.fileno(),),
        preexec_fn=lambda: limits(limit, mem, False),
        close_fds=True,
    )  # noqa: PLW1509 - one thread
    os.close(out_w)
    os.close(err_w)
    b.close()
    Channel(a).send({"solution": spec["solution"], "prelude": spec.get("prelude", ""), "max_output": spec.get("max_output", 1 << 16)})
    cpid = os.fork()
    if cpid == 0:
        os.close(res_r)
        try:
            checker_main(test, spec.get("setup", ""), a, res_w)
        finally:
            os._exit(1)
    a.close()
    os.close(res_w)
    return {
        "pid": cpid,
        "proc": proc,
        "open": {out, err, res_r},
        "data": {out: [], err: [], res_r: []},
        "out": out,
        "err": err,
        "res": res_r,
        "t0": time.monotonic(),
        "ready": False,
    }


def run_python(test, mode, code):
    if mode == "stdio":
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__})  # noqa: S102 - running the code is the point
        return
    ns = {"__name__": "solution", "__builtins__": __builtins__}
    exec(code, ns)  # noqa: S102 - running the code is the point
    fn = test["fn"]
    if "." in fn:
        cls, method = fn.split(".", 1)
        target = getattr(ns[cls](), method)
    elif fn not in ns and "Solution" in ns:
        target = getattr(ns["Solution"](), fn)  # LeetCode: class Solution
    else:
        target = ns[fn]
    args = json.loads(test["args"])
    try:
        result = target(*args)
    except SystemExit:
        # Leaving from inside the function is not returning a value.
        os.write(2, b"\nexited inside the function\n")
        os._exit(1)
    line = "\n" + RESULT_MARK + _dumps(result, default=repr) + "\n"
    sys.stdout.flush()
    write_all(1, line.encode())


RESULT_MARK = "\x00prorl-result\x00"


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def reap(running, results, limit, cap):
    fds = {}
    for i, st in running.items():
        for fd in st["open"]:
            fds[fd] = i
    if fds:
        ready, _, _ = select.select(list(fds), [], [], 0.05)
        for fd in ready:
            drain_one(running[fds[fd]], fd, cap)
    now = time.monotonic()
    for i in list(running):
        st = running[i]
        wpid, status, usage = os.wait4(st["pid"], os.WNOHANG)
        timed_out = False
        if wpid == 0:
            allowed = wall_limit(limit) if st.get("ready", True) else STARTUP_LIMIT
            # The solution's process: the forked test, or a check's solution.
            sol = st["proc"].pid if "proc" in st else st["pid"]
            if now - st["t0"] - (runq_wait(sol) - st.get("q0", 0.0)) <= allowed:
                continue
            os.kill(st["pid"], signal.SIGKILL)
            _, status, usage = os.wait4(st["pid"], 0)
            timed_out = True
        sol_status = None
        if "proc" in st:
            # The checker ended: what became of the solution process?
            p = st["proc"]
            wpid, pstatus, usage = os.wait4(p.pid, os.WNOHANG)
            if wpid == 0:
                # Not p.kill(): it polls first, and reaping there would
                # lose the solution's CPU time. Unreaped, the pid is ours.
                os.kill(p.pid, signal.SIGKILL)
                _, pstatus, usage = os.wait4(p.pid, 0)
            else:
                sol_status = os.waitstatus_to_exitcode(pstatus)
            p.returncode = os.waitstatus_to_exitcode(pstatus)  # reaped here, not by Popen
        cpu = usage.ru_utime + usage.ru_stime
        if cpu > limit:
            timed_out = True
        for fd in list(st["open"]):
            while True:
                r, _, _ = select.select([fd], [], [], 0)
                if not r or not drain_one(st, fd, cap):
                    break
        for fd in st["open"]:
            os.close(fd)
        out = b"".join(st["data"][st["out"]])
        err = b"".join(st["data"][st["err"]])
        res = {
            "time": round(now - st["t0"], 4),
            "cpu": round(cpu, 4),
            "timed_out": timed_out,
            "stdout": out[:cap].decode("utf-8", "replace"),
            "stdout_truncated": len(out) > cap,
            "stderr": err[-2000:].decode("utf-8", "replace"),
        }
        if "proc" in st:
            raw = b"".join(st["data"][st["res"]])
            try:
                res["check"] = json.loads(raw) if raw else {"passed": False, "kind": "error", "error": "the checker ended without a result"}
            except ValueError:
                res["check"] = {"passed": False, "kind": "error", "error": "unreadable checker result"}
            if sol_status is not None:
                if sol_status < 0:
                    res["signal"] = -sol_status
                else:
                    res["exit"] = sol_status
            elif not timed_out:
                res["exit"] = 0
        elif not timed_out:
            if os.WIFSIGNALED(status):
                res["signal"] = os.WTERMSIG(status)
            else:
                res["exit"] = os.WEXITSTATUS(status)
        results[i] = res
        del running[i]


def drain_one(st, fd, cap):
    """Read once from fd; False at its end (it is then closed)."""
    chunk = os.read(fd, 65536)
    if chunk and fd == st.get("res") and not st.get("ready", True):
        # The checker says the solution's interpreter is up: the clock starts.
        st["ready"], st["t0"], st["q0"] = True, time.monotonic(), runq_wait(st["proc"].pid)
        chunk = chunk[len(READY) :]
        if not chunk:
            return True
    if chunk:
        buf = st["data"][fd]
        if fd == st.get("res") or sum(len(c) for c in buf) <= cap + 65536:
            buf.append(chunk)
        return True
    os.close(fd)
    st["open"].discard(fd)
    return False


# ---- special judges ------------------------------------------------------------


def run_checker_mode(spec):
    """Run a checker program on each case: argv input, output, answer (the
    testlib order); exit 0 accepted, 1 wrong, 2 presentation (wrong), other
    a failure of the checker."""
    work = tempfile.mkdtemp(prefix="prorl-checker-")
    try:
        check_all(spec, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_all(spec, work):
    lang = spec["language"]
    src = spec["source"]
    if lang == "python":
        path = os.path.join(work, "checker.py")
        with open(path, "w") as f:
            f.write(src)
        argv = [sys.executable, "-I", path]
    elif lang == "cpp":
        path = os.path.join(work, "checker.cpp")
        with open(path, "w") as f:
            f.write(src)
        exe = os.path.join(work, "checker")
        err = compile_step(["g++", "-std=gnu++17", "-O2", "-pipe", "-o", exe, path], work)
        if err is not None:
            print(_dumps({"compile_error": err[-4000:]}))
            return
        argv = [exe]
    else:
        print(_dumps({"compile_error": f"unsupported checker language {lang!r}"}))
        return
    out = []
    for n, case in enumerate(spec["cases"]):
        files = []
        for kind in ("input", "output", "answer"):
            p = os.path.join(work, f"{n}.{kind}")
            with open(p, "w") as f:
                f.write(case[kind])
            files.append(p)
        try:
            p = subprocess.run(
                argv + files,
                cwd=work,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=False,
                timeout=float(spec.get("time_limit", 10)),
            )
            out.append({"exit": p.returncode, "message": (p.stderr or p.stdout)[-500:].decode("utf-8", "replace")})
        except subprocess.TimeoutExpired:
            out.append({"exit": -1, "message": "checker timed out"})
    print(_dumps({"checks": out}))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "runner":
        runner_main(int(sys.argv[2]))
    else:
        main()
