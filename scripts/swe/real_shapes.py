"""Fixtures in the layout of the real SWE images (imported by make_fixtures.py).

What the real images have, and the stand-in here:
- SWE-bench / SWE-Gym / SWE-smith: the repository at /testbed, installed in
  editable mode into a conda env at /opt/miniconda3/envs/testbed, activated
  with `source /opt/miniconda3/bin/activate && conda activate testbed`.
  Conda cannot be installed here, so /opt/miniconda3/bin/activate is a
  stand-in that defines `conda activate ENV`; the env is a Python venv of
  the image's python3 (system site packages on, for pytest) whose
  site-packages holds what `pip install -e .` writes for the repository (a
  .pth naming /testbed, or /testbed/src) and the project's pure-Python
  dependencies, unpacked from their PyPI wheels. The harness's own
  `python -m pip install -e .` step fails here (no pip, no network) and,
  as in the harness (set -u, no -e), the script goes on.
- R2E-Gym: the repository at /testbed with its uv venv at /testbed/.venv,
  run_tests.sh in the repository (untracked), the held-out tests in
  /r2e_tests.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "prorl", "swe-fixture-sources")
DJANGO, SYMPY = "4.2.17", "1.12"
WHEELS = {"asgiref": "3.8.1", "sqlparse": "0.5.1", "mpmath": "1.3.0"}


def pip():
    """A venv's pip: a Debian python3 may have no pip of its own."""
    venv = os.path.join(os.path.dirname(CACHE), "venv-fetch")
    if not os.path.exists(os.path.join(venv, "bin", "pip")):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    return os.path.join(venv, "bin", "pip")


def fetch(name, version, sdist):
    """Downloads a pinned sdist or wheel from PyPI once; returns its path."""
    os.makedirs(CACHE, exist_ok=True)
    for f in os.listdir(CACHE):
        if f.lower().startswith((f"{name}-{version}").lower()) and f.endswith((".tar.gz", ".whl")):
            return os.path.join(CACHE, f)
    kind = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    subprocess.run(
        [pip(), "download", "-q", "--disable-pip-version-check", "--no-deps", *kind, f"{name}=={version}", "-d", CACHE], check=True
    )
    return fetch(name, version, sdist)


def unpack_sdist(name, version, where, drop=()):
    path = fetch(name, version, True)
    with tarfile.open(path) as tf:
        tf.extractall(where, filter="data")  # data: no owners (root would chown to the packager)
    top = next(d for d in os.listdir(where) if d.lower() == (f"{name}-{version}").lower())
    src = os.path.join(where, top)
    for d in drop:
        shutil.rmtree(os.path.join(src, d), ignore_errors=True)
    return src


def python_version(rootfs):
    for d in sorted(os.listdir(os.path.join(rootfs, "usr", "lib"))):
        if d.startswith("python3.") and d[8:].isdigit():
            return d[len("python") :]
    raise SystemExit("no python3.N in the base image")


def make_venv(prefix_in_image, rootfs, pth_dirs, wheels):
    """A venv of the image's python3 at prefix_in_image (inside rootfs)."""
    ver = python_version(rootfs)
    root = rootfs + prefix_in_image
    bindir, site = os.path.join(root, "bin"), os.path.join(root, "lib", "python" + ver, "site-packages")
    os.makedirs(bindir)
    os.makedirs(site)
    with open(os.path.join(root, "pyvenv.cfg"), "w") as f:
        f.write(f"home = /usr/bin\ninclude-system-site-packages = true\nversion = {ver}\n")
    os.symlink("/usr/bin/python3", os.path.join(bindir, "python3"))
    os.symlink("python3", os.path.join(bindir, "python"))
    script = os.path.join(bindir, "pytest")
    with open(script, "w") as f:
        f.write(f"#!{prefix_in_image}/bin/python\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n")
    os.chmod(script, 0o755)
    with open(os.path.join(bindir, "activate"), "w") as f:
        f.write(f'export VIRTUAL_ENV={prefix_in_image}\nexport PATH="$VIRTUAL_ENV/bin:$PATH"\n')
    for i, d in enumerate(pth_dirs):
        # What `pip install -e .` leaves: a path file naming the source.
        with open(os.path.join(site, f"__editable__.testbed-{i}.pth"), "w") as f:
            f.write(d + "\n")
    for w in wheels:
        with zipfile.ZipFile(fetch(w, WHEELS[w], False)) as z:
            z.extractall(site)


CONDA_ACTIVATE = """# Stand-in for Miniconda's bin/activate (conda cannot be installed in this
# environment): sourcing it defines `conda activate ENV` for the envs under
# /opt/miniconda3/envs, which puts ENV/bin first on PATH as conda does.
export CONDA_EXE=/opt/miniconda3/bin/conda CONDA_SHLVL=1 CONDA_DEFAULT_ENV=base CONDA_PREFIX=/opt/miniconda3
export PATH="/opt/miniconda3/bin:$PATH"
conda() {
  if [ "${1:-}" = activate ] && [ -d "/opt/miniconda3/envs/${2:-}" ]; then
    export CONDA_DEFAULT_ENV="$2" CONDA_PREFIX="/opt/miniconda3/envs/$2"
    export PATH="$CONDA_PREFIX/bin:$PATH"
    return 0
  fi
  echo "conda (stand-in): only 'conda activate ENV' for an env in /opt/miniconda3/envs" >&2
  return 1
}
"""


def add_conda(rootfs, pth_dirs, wheels):
    os.makedirs(os.path.join(rootfs, "opt", "miniconda3", "bin"))
    with open(os.path.join(rootfs, "opt", "miniconda3", "bin", "activate"), "w") as f:
        f.write(CONDA_ACTIVATE)
    make_venv("/opt/miniconda3/envs/testbed", rootfs, pth_dirs, wheels)


def replace(repo, edits):
    for path, (old, new) in edits.items():
        full = os.path.join(repo, path)
        text = ""
        if os.path.exists(full):
            with open(full) as f:
                text = f.read()
        if old not in text:
            raise SystemExit(f"{path}: {old[:60]!r} not found")
        with open(full, "w") as f:
            f.write(text.replace(old, new, 1))


SMALL_TEST = "import pytest\nfrom shapes.geom import area, perimeter\n\n\ndef test_area():\n    assert area(2, 3) == 6\n\n\ndef test_perimeter():\n    assert perimeter(2, 3) == 10\n"

# Each: how to make the tree at the base commit, the bug, fix and test
# edits, and the row's fields.
SHAPES = [
    {
        # Django from its sdist: the harness's eval script for django/django 4.2.
        "id": "django__django-90001",
        "repo": "django/django",
        "version": "4.2",
        "kind": "swebench",
        "sdist": ("Django", DJANGO, ["docs", "js_tests", "extras"]),
        "pth": ["/testbed"],
        "wheels": ["asgiref", "sqlparse"],
        "problem": "django.utils.text.capfirst('hello World') returns 'Hello world': it must only change the first letter.",
        "bug": {"django/utils/text.py": ("    return x[0].upper() + x[1:]\n", "    return x[0].upper() + x[1:].lower()\n")},
        "fix": {"django/utils/text.py": ("    return x[0].upper() + x[1:].lower()\n", "    return x[0].upper() + x[1:]\n")},
        "tests": {
            "tests/utils_tests/test_text.py": (
                "    def test_smart_split(self):\n",
                '    def test_capfirst(self):\n        self.assertEqual(text.capfirst("hello World"), "Hello World")\n\n    def test_smart_split(self):\n',
            )
        },
        "f2p": ["test_capfirst (utils_tests.test_text.TestUtilsText.test_capfirst)"],
        "p2p": [
            "test_get_text_list (utils_tests.test_text.TestUtilsText.test_get_text_list)",
            "test_wrap (utils_tests.test_text.TestUtilsText.test_wrap)",
        ],
        "wrong": {"django/utils/text.py": ("    return x[0].upper() + x[1:].lower()\n", "    return x.upper()\n")},
    },
    {
        # sympy from its sdist, tested by bin/test. The sdist lacks the
        # repository's bin/test (a thin wrapper of sympy.test); the stand-in
        # calls sympy.test with the options bin/test maps -C and --verbose to.
        "id": "sympy__sympy-90002",
        "repo": "sympy/sympy",
        "version": "1.12",
        "kind": "swebench",
        "sdist": ("sympy", SYMPY, ["doc"]),
        "pth": ["/testbed"],
        "wheels": ["mpmath"],
        "extra": {
            "bin/test": "#!/usr/bin/env python\n# Stand-in for sympy's bin/test (not in the sdist): -C is no colours.\nimport sys\nsys.path.insert(0, '.')\nimport sympy\nargs = [a for a in sys.argv[1:] if not a.startswith('-')]\nsys.exit(not sympy.test(*args, colors='-C' not in sys.argv, verbose='--verbose' in sys.argv))\n"
        },
        "problem": "Tuple(0, 4, 1, 4).tuple_count(4) returns 1; it must count every occurrence.",
        "bug": {
            "sympy/core/containers.py": ("        return self.args.count(value)\n", "        return int(value in self.args)\n"),
            "sympy/core/tests/test_containers.py": (
                "def test_Tuple_tuple_count():\n    assert Tuple(0, 1, 2, 3).tuple_count(4) == 0\n    assert Tuple(0, 4, 1, 2, 3).tuple_count(4) == 1\n    assert Tuple(0, 4, 1, 4, 2, 3).tuple_count(4) == 2\n    assert Tuple(0, 4, 1, 4, 2, 4, 3).tuple_count(4) == 3\n",
                "",
            ),
        },
        "fix": {"sympy/core/containers.py": ("        return int(value in self.args)\n", "        return self.args.count(value)\n")},
        "tests": {
            "sympy/core/tests/test_containers.py": (
                "def test_Tuple_index():\n",
                "def test_Tuple_tuple_count():\n    assert Tuple(0, 1, 2, 3).tuple_count(4) == 0\n    assert Tuple(0, 4, 1, 4, 2, 3).tuple_count(4) == 2\n\n\ndef test_Tuple_index():\n",
            )
        },
        "f2p": ["test_Tuple_tuple_count"],
        "p2p": ["test_Tuple", "test_Tuple_index"],
        "wrong": {"sympy/core/containers.py": ("        return int(value in self.args)\n", "        return len(self.args)\n")},
    },
    {
        # src layout: only the editable install makes the package importable.
        "id": "prorl__srcpkg-90003",
        "repo": "prorl/srcpkg",
        "version": "0.1",
        "kind": "swebench",
        "pth": ["/testbed/src"],
        "wheels": [],
        "files": {
            "pyproject.toml": '[project]\nname = "srcpkg"\nversion = "0.1"\n',
            "src/srcpkg/__init__.py": "",
            "src/srcpkg/words.py": "def count_words(s):\n    return len(s.split(' '))\n",
            "tests/test_words.py": "from srcpkg.words import count_words\n\n\ndef test_simple():\n    assert count_words('a b c') == 3\n",
        },
        "problem": "count_words('a  b') returns 3: runs of spaces must count as one separator.",
        "fix": {"src/srcpkg/words.py": ("s.split(' ')", "s.split()")},
        "tests": {"tests/test_words.py": ("== 3\n", "== 3\n\n\ndef test_runs():\n    assert count_words('a  b') == 2\n")},
        "f2p": ["tests/test_words.py::test_runs"],
        "p2p": ["tests/test_words.py::test_simple"],
        "test_cmd": "pytest -rA -p no:cacheprovider tests/test_words.py",
        "wrong": {"src/srcpkg/words.py": ("s.split(' ')", "s.split('  ')")},
    },
    {
        # R2E-Gym: no instance_id; .venv in the repository; hidden tests.
        "kind": "r2e",
        "repo_name": "prorl_r2e",
        "repo": "prorl/r2e",
        "files": {
            ".gitignore": ".venv\n",
            "stats/__init__.py": "",
            "stats/mean.py": "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\n\ndef total(xs):\n    return sum(xs)\n",
        },
        "problem": "[ISSUE]\nstats.mean.mean([2, 4]) returns 2.0 instead of 3.0.\n[/ISSUE]",
        "fix": {"stats/mean.py": ("(len(xs) + 1)", "len(xs)")},
        "r2e_tests": {
            "__init__.py": "",
            "test_1.py": "from stats.mean import mean, total\n\n\nclass TestKlass:\n    def test_alpha(self):\n        assert total([1, 2]) == 3\n\n    def test_gamma(self):\n        assert mean([2, 4]) == 3.0\n\n\ndef test_plain():\n    assert total([]) == 0\n",
        },
        "expected": {"TestKlass.test_alpha": "PASSED", "TestKlass.test_gamma": "PASSED", "test_plain": "PASSED"},
        "wrong": {"stats/mean.py": ("(len(xs) + 1)", "(len(xs) - 1)")},
    },
    {
        # SWE-smith: the image holds the clean repository; the row's patch is the bug.
        "kind": "swesmith",
        "owner_repo": "prorl__shapes",
        "pth": ["/testbed"],
        "wheels": [],
        "files": {
            "shapes/__init__.py": "",
            "shapes/geom.py": "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n",
            "tests/test_geom.py": SMALL_TEST,
        },
        "problem": "area(2, 3) returns 5 instead of 6.",
        "bug": {"shapes/geom.py": ("return w * h", "return w + h")},
        "f2p": ["tests/test_geom.py::test_area"],
        "p2p": ["tests/test_geom.py::test_perimeter"],
        "wrong": {"shapes/geom.py": ("return w + h", "return w * h + 0.5")},
    },
]


def build(shape, where, git, commit, diff):
    """Makes the repository and the row; returns (repo dir, row, extra image dirs)."""
    repo = os.path.join(where, f"repo-{SHAPES.index(shape)}")
    if "sdist" in shape:
        name, ver, drop = shape["sdist"]
        src = unpack_sdist(name, ver, where, drop)
        os.rename(src, repo)
    else:
        os.makedirs(repo)
    for path, text in dict(shape.get("files", {}), **shape.get("extra", {})).items():
        full = os.path.join(repo, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
        if path.startswith("bin/"):
            os.chmod(full, 0o755)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "gc.auto", "0")  # no gc in the background while the tree is copied
    clean = commit(repo, "Import", 1)
    kind = shape["kind"]
    row = {"problem_statement": shape["problem"]}
    if kind == "swesmith":
        # The image stays clean; the bug is the row's patch.
        replace(repo, shape["bug"])
        buggy = commit(repo, "bug", 2)
        bug_patch = diff(repo, clean, buggy)
        gold = diff(repo, buggy, clean)
        replace(repo, shape["wrong"])
        wrong = git(repo, "diff", "--no-color") + "\n"
        git(repo, "checkout", "-q", "-f", clean)
        git(repo, "branch", "-q", "-f", "main", clean)
        git(repo, "checkout", "-q", "main")
        short = clean[:8]
        row.update(
            {
                "instance_id": "{}.{}.func_pm_op_swap__prorl1".format(shape["owner_repo"], short),
                "repo": "swesmith/{}.{}".format(shape["owner_repo"], short),
                "patch": bug_patch,
                "FAIL_TO_PASS": shape["f2p"],
                "PASS_TO_PASS": shape["p2p"],
                "image_name": "prorl/swesmith.x86_64.{}.{}".format(shape["owner_repo"].replace("__", "_1776_"), short),
                "created_at": "2024-01-01T00:00:00",
            }
        )
        pack(repo, git)
        return repo, row, gold, wrong
    base = clean
    if "bug" in shape:
        replace(repo, shape["bug"])
        base = commit(repo, "Base", 2)
    git(repo, "checkout", "-q", "-b", "scratch")
    replace(repo, shape["fix"])
    fixed = commit(repo, "Fix", 3)
    gold = diff(repo, base, fixed)
    if "tests" in shape:
        replace(repo, shape["tests"])
        tested = commit(repo, "Tests", 4)
        row["test_patch"] = diff(repo, fixed, tested)
    git(repo, "checkout", "-q", "-f", "main")
    replace(repo, shape["wrong"])
    wrong = git(repo, "diff", "--no-color") + "\n"
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "branch", "-q", "-D", "scratch")
    if kind == "r2e":
        row.update(
            {
                "repo_name": shape["repo_name"],
                "commit_hash": fixed,
                "docker_image": "prorl/{}_final:{}".format(shape["repo_name"], fixed),
                "expected_output_json": json.dumps(shape["expected"]),
                "parsed_commit_content": "{}",
            }
        )
    else:
        row.update(
            {
                "instance_id": shape["id"],
                "repo": shape["repo"],
                "version": shape["version"],
                "base_commit": base,
                "FAIL_TO_PASS": json.dumps(shape["f2p"]),
                "PASS_TO_PASS": json.dumps(shape["p2p"]),
            }
        )
        if "test_cmd" in shape:
            row["test_cmd"] = shape["test_cmd"]
    pack(repo, git)
    return repo, row, gold, wrong


def pack(repo, git):
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")


def instance_id(row):
    if "instance_id" in row:
        return row["instance_id"]
    return row["repo_name"] + "-" + row["commit_hash"][:7]


def dress(shape, root, repo):
    """Puts the repository and its environment into an image root."""
    testbed = os.path.join(root, "testbed")
    shutil.rmtree(testbed, ignore_errors=True)
    shutil.copytree(repo, testbed, symlinks=True)
    if shape["kind"] == "r2e":
        make_venv("/testbed/.venv", root, ["/testbed"], [])
        with open(os.path.join(testbed, "run_tests.sh"), "w") as f:
            f.write(".venv/bin/python -W ignore -m pytest -rA r2e_tests\n")
        tests = os.path.join(root, "r2e_tests")
        shutil.rmtree(tests, ignore_errors=True)
        os.makedirs(tests)
        for name, text in shape["r2e_tests"].items():
            with open(os.path.join(tests, name), "w") as f:
                f.write(text)
        return
    shutil.rmtree(os.path.join(root, "opt", "miniconda3"), ignore_errors=True)
    add_conda(root, shape["pth"], shape["wheels"])
