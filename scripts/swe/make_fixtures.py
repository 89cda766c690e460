#!/usr/bin/env python3
"""Builds the SWE fixtures: small real Python repositories with git history,
a real bug, a problem statement, FAIL_TO_PASS and PASS_TO_PASS tests, packed
into per-instance sandbox images (the default Debian image, hard-linked, plus
the repository at /testbed).

Usage: make_fixtures.py <base rootfs> <image dir> <tasks.jsonl out> [<base .sandbox dir> <apptainer>]

With the base image's Apptainer sandbox directory it also makes
swe-ID.sandbox (Apptainer runs it unpacked, rootless) and, with an apptainer
binary, swe-ID.sif.

Commits have fixed authors and dates, so their hashes (and the committed
examples/swe/tasks.jsonl) are the same on every machine.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_shapes  # noqa: E402

VERSION = "prorl-swe-fixtures-2"


def git(repo, *args, env_extra=None):
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="Fixture",
        GIT_AUTHOR_EMAIL="fixture@prorl.invalid",
        GIT_COMMITTER_NAME="Fixture",
        GIT_COMMITTER_EMAIL="fixture@prorl.invalid",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
    )
    env.update(env_extra or {})
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def write(repo, files):
    for path, text in files.items():
        full = os.path.join(repo, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def commit(repo, message, when):
    git(repo, "add", "-A")
    date = f"2024-01-{when:02d}T12:00:00+00:00"
    git(repo, "commit", "-q", "-m", message, env_extra={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
    return git(repo, "rev-parse", "HEAD")


def diff(repo, a, b, *paths):
    return git(repo, "diff", "--no-color", a, b, "--", *paths) + "\n"


# Each instance: files at the base commit, the fix (source files), the new
# or changed tests (test files), the failing and passing test ids, and
# extra history after the base (to prove it is hidden).
INSTANCES = [
    {
        "id": "prorl__calc-1",
        "repo": "prorl/calc",
        "problem": "calc.ops.add(2, 3) returns -1: it subtracts instead of adding.",
        "base": {
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
            "tests/__init__.py": "",
            "tests/test_ops.py": "from calc.ops import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n",
        },
        "fix": {"calc/ops.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"},
        "tests": {
            "tests/test_ops.py": "from calc.ops import add, mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
        },
        "f2p": ["tests/test_ops.py::test_add"],
        "p2p": ["tests/test_ops.py::test_mul"],
    },
    {
        "id": "prorl__textutil-2",
        "repo": "prorl/textutil",
        "problem": "slugify('Hello World') returns 'Hello-World'; slugs must be lower case ('hello-world').",
        "base": {
            "textutil/__init__.py": "",
            "textutil/slug.py": "def slugify(s):\n    return '-'.join(s.split())\n",
            "tests/test_slug.py": "from textutil.slug import slugify\n\n\ndef test_spaces():\n    assert slugify('a  b') == 'a-b'\n",
        },
        "fix": {"textutil/slug.py": "def slugify(s):\n    return '-'.join(s.lower().split())\n"},
        "tests": {
            "tests/test_slug.py": "from textutil.slug import slugify\n\n\ndef test_spaces():\n    assert slugify('a  b') == 'a-b'\n\n\ndef test_lower():\n    assert slugify('Hello World') == 'hello-world'\n"
        },
        "f2p": ["tests/test_slug.py::test_lower"],
        "p2p": ["tests/test_slug.py::test_spaces"],
    },
    {
        "id": "prorl__mathx-3",
        "repo": "prorl/mathx",
        "problem": "clamp(5, 0, 5) returns 4; the upper bound must be inclusive.",
        "base": {
            "mathx/__init__.py": "",
            "mathx/clamp.py": "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x >= hi:\n        return hi - 1\n    return x\n",
            "tests/test_clamp.py": "import pytest\nfrom mathx.clamp import clamp\n\n\n@pytest.mark.parametrize('x,want', [(-1, 0), (3, 3)])\ndef test_inside(x, want):\n    assert clamp(x, 0, 5) == want\n",
        },
        "fix": {
            "mathx/clamp.py": "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n"
        },
        "tests": {
            "tests/test_clamp.py": "import pytest\nfrom mathx.clamp import clamp\n\n\n@pytest.mark.parametrize('x,want', [(-1, 0), (3, 3)])\ndef test_inside(x, want):\n    assert clamp(x, 0, 5) == want\n\n\ndef test_upper():\n    assert clamp(5, 0, 5) == 5\n    assert clamp(9, 0, 5) == 5\n"
        },
        "f2p": ["tests/test_clamp.py::test_upper"],
        "p2p": ["tests/test_clamp.py::test_inside[-1-0]", "tests/test_clamp.py::test_inside[3-3]"],
    },
    {
        "id": "prorl__parse-4",
        "repo": "prorl/parse",
        "runner": "unittest",
        "problem": "parse_int('+5') raises ValueError: a leading plus sign must be accepted.",
        "base": {
            "parse/__init__.py": "",
            "parse/num.py": "def parse_int(s):\n    s = s.strip()\n    if not s.lstrip('-').isdigit():\n        raise ValueError(s)\n    return int(s)\n",
            "tests/__init__.py": "",
            "tests/test_num.py": "import unittest\nfrom parse.num import parse_int\n\n\nclass TestNum(unittest.TestCase):\n    def test_negative(self):\n        self.assertEqual(parse_int(' -7 '), -7)\n",
        },
        "fix": {
            "parse/num.py": "def parse_int(s):\n    s = s.strip()\n    if not s.lstrip('+-').isdigit():\n        raise ValueError(s)\n    return int(s)\n"
        },
        "tests": {
            "tests/test_num.py": "import unittest\nfrom parse.num import parse_int\n\n\nclass TestNum(unittest.TestCase):\n    def test_negative(self):\n        self.assertEqual(parse_int(' -7 '), -7)\n\n    def test_plus(self):\n        self.assertEqual(parse_int('+5'), 5)\n"
        },
        "f2p": ["test_plus (tests.test_num.TestNum.test_plus)"],
        "p2p": ["test_negative (tests.test_num.TestNum.test_negative)"],
        "test_cmd": "python3 -m unittest -v tests.test_num",
    },
    {
        # The fix is in a later commit of the repository: the agent must not be able to find it.
        "id": "prorl__stack-5",
        "repo": "prorl/stack",
        "problem": "Stack.pop() on an empty stack raises IndexError; it must raise stack.EmptyStack.",
        "base": {
            "stack/__init__.py": "from .core import Stack, EmptyStack\n",
            "stack/core.py": "class EmptyStack(Exception):\n    pass\n\n\nclass Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)\n\n    def pop(self):\n        return self.items.pop()\n",
            "tests/test_stack.py": "from stack import Stack\n\n\ndef test_push_pop():\n    s = Stack()\n    s.push(1)\n    assert s.pop() == 1\n",
        },
        "fix": {
            "stack/core.py": "class EmptyStack(Exception):\n    pass\n\n\nclass Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)\n\n    def pop(self):\n        if not self.items:\n            raise EmptyStack('pop from an empty stack')\n        return self.items.pop()\n"
        },
        "tests": {
            "tests/test_stack.py": "import pytest\nfrom stack import Stack, EmptyStack\n\n\ndef test_push_pop():\n    s = Stack()\n    s.push(1)\n    assert s.pop() == 1\n\n\ndef test_empty():\n    with pytest.raises(EmptyStack):\n        Stack().pop()\n"
        },
        "f2p": ["tests/test_stack.py::test_empty"],
        "p2p": ["tests/test_stack.py::test_push_pop"],
        "later": "commit",  # the fix, then another commit, on the main branch
    },
    {
        # The fix sits on a branch and under a tag: both must be gone.
        "id": "prorl__dates-6",
        "repo": "prorl/dates",
        "problem": "is_leap(1900) returns True; century years are leap years only when divisible by 400.",
        "base": {
            "dates/__init__.py": "",
            "dates/leap.py": "def is_leap(y):\n    return y % 4 == 0\n",
            "tests/test_leap.py": "from dates.leap import is_leap\n\n\ndef test_common():\n    assert is_leap(2024)\n    assert not is_leap(2023)\n",
        },
        "fix": {"dates/leap.py": "def is_leap(y):\n    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)\n"},
        "tests": {
            "tests/test_leap.py": "from dates.leap import is_leap\n\n\ndef test_common():\n    assert is_leap(2024)\n    assert not is_leap(2023)\n\n\ndef test_century():\n    assert not is_leap(1900)\n    assert is_leap(2000)\n"
        },
        "f2p": ["tests/test_leap.py::test_century"],
        "p2p": ["tests/test_leap.py::test_common"],
        "later": "branch",
    },
]


def build_repo(inst, where):
    repo = os.path.join(where, inst["id"])
    os.makedirs(repo)
    git(repo, "init", "-q", "-b", "main")
    write(repo, {"README.md": f"# {inst['repo']}\n"})
    commit(repo, "Initial commit", 1)
    write(repo, inst["base"])
    base = commit(repo, "Add " + inst["repo"].split("/")[1], 2)
    # The gold patch and test patch, made on a scratch branch.
    git(repo, "checkout", "-q", "-b", "scratch")
    write(repo, inst["fix"])
    fixed = commit(repo, "Fix: " + inst["problem"][:40], 3)
    gold = diff(repo, base, fixed)
    write(repo, inst["tests"])
    tested = commit(repo, "Tests for the fix", 4)
    test_patch = diff(repo, fixed, tested)
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "scratch")
    later = inst.get("later")
    if later == "commit":
        git(repo, "cherry-pick", fixed, env_extra={"GIT_COMMITTER_DATE": "2024-01-05T12:00:00+00:00"})
        write(repo, {"CHANGELOG.md": "Fixed pop on an empty stack.\n"})
        commit(repo, "Changelog", 6)
    elif later == "branch":
        git(repo, "branch", "-q", "fix-leap", fixed)
        git(repo, "tag", "v1.1", fixed)
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    return repo, base, fixed, gold, test_patch


def solution(gold):
    """What the simulator sends to apply the gold patch."""
    return "bash:\ncd /testbed && git apply <<'PRORL_PATCH'\n" + gold + "PRORL_PATCH"


def pack_image(target, base_rootfs, base_sandbox, apptainer, put):
    """Makes one instance's images: the base image hard-linked (the images
    share its files) with put(root) adding the instance, as a bwrap root
    directory, an Apptainer sandbox directory and, with apptainer, a SIF."""
    if os.path.exists(target):
        shutil.rmtree(target)
    os.makedirs(target)
    os.chmod(target, 0o755)
    rootfs = os.path.join(target, "rootfs")
    subprocess.run(["cp", "-al", base_rootfs, rootfs], check=True)
    put(rootfs)
    if not base_sandbox:
        return
    sandbox = target + ".sandbox"
    if os.path.exists(sandbox):
        shutil.rmtree(sandbox)
    subprocess.run(["cp", "-al", base_sandbox, sandbox], check=True)
    put(sandbox)
    if apptainer:
        # Uncompressed: a fixture's SIF is the base image again, and
        # compressing it took 45-60 s on 2 cores, 9 minutes of a fresh
        # machine's make test for the eleven fixtures. Apptainer mounts an
        # uncompressed squashfs like any other.
        subprocess.run(
            [apptainer, "build", "--force", "--mksquashfs-args", "-noI -noD -noF -noX", target + ".sif", sandbox],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def main():
    base_rootfs, image_dir, tasks_out = sys.argv[1:4]
    base_sandbox = sys.argv[4] if len(sys.argv) > 4 else ""
    apptainer = sys.argv[5] if len(sys.argv) > 5 else ""
    stamp = os.path.join(image_dir, "swe-fixtures.version")

    def built(i):
        name = os.path.join(image_dir, "swe-" + i["id"])
        return (
            os.path.isdir(os.path.join(name, "rootfs", "testbed"))
            and (not base_sandbox or os.path.isdir(name + ".sandbox"))
            and (not apptainer or os.path.exists(name + ".sif"))
        )

    current = os.path.exists(stamp) and open(stamp).read().strip() == VERSION and all(built(i) for i in INSTANCES)
    if current:
        known = [json.loads(line) for line in open(tasks_out)] if os.path.exists(tasks_out) else []
        current = len(known) == len(INSTANCES) + len(real_shapes.SHAPES) and all(built({"id": real_shapes.instance_id(r)}) for r in known)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for inst in INSTANCES:
            repo, base, fixed, gold, test_patch = build_repo(inst, tmp)
            row = {
                "instance_id": inst["id"],
                "repo": inst["repo"],
                "base_commit": base,
                "problem_statement": inst["problem"],
                "FAIL_TO_PASS": json.dumps(inst["f2p"]),
                "PASS_TO_PASS": json.dumps(inst["p2p"]),
                "test_patch": test_patch,
                "version": "0.1",
                "fix_commit": fixed,
                "solution": solution(gold),
            }
            # Not SWE-bench repositories: the harness has no spec for them,
            # so the row names its test command, as SWE-Gym-style rows may.
            files = sorted({line.split(" b/")[-1] for line in test_patch.splitlines() if line.startswith("diff --git ")})
            row["test_cmd"] = inst.get("test_cmd", "python3 -m pytest -rA -p no:cacheprovider " + " ".join(files))
            rows.append(row)
            if current:
                continue

            def put_testbed(root, repo=repo):
                testbed = os.path.join(root, "testbed")
                shutil.rmtree(testbed, ignore_errors=True)
                shutil.copytree(repo, testbed, symlinks=True)

            pack_image(os.path.join(image_dir, "swe-" + inst["id"]), base_rootfs, base_sandbox, apptainer, put_testbed)
        # Instances in the layout of the real images (real_shapes.py).
        for shape in real_shapes.SHAPES:
            repo, row, gold, wrong = real_shapes.build(shape, tmp, git, commit, diff)
            row["solution"] = solution(gold)
            row["wrong_patch"] = wrong
            rows.append(row)
            if current:
                continue
            pack_image(
                os.path.join(image_dir, "swe-" + real_shapes.instance_id(row)),
                base_rootfs,
                base_sandbox,
                apptainer,
                lambda root, shape=shape, repo=repo: real_shapes.dress(shape, root, repo),
            )
    with open(tasks_out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    with open(stamp, "w") as f:
        f.write(VERSION + "\n")


if __name__ == "__main__":
    main()
