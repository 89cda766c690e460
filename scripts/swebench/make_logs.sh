#!/usr/bin/env bash
# Produces real test logs from real runners, the inputs on which
# plugins/swe/testlog's parsers must agree with SWE-bench's harness:
# pytest 5.4, 6.2, 7.4 and 8.3 (plain and with colour), Django's
# runtests.py from the Django sdist and sympy's test runner from the
# sympy sdist, each running the probe tests in scripts/swebench/probe beside
# real tests of the project. Writes plugins/swe/testlog/testdata/logs/*.log
# and index.tsv (log, parser). Run by `make swe-logs`; takes a few minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../plugins/swe/testlog/testdata/logs}
work=${PRORL_CACHE:-$HOME/.cache/prorl}/swe-logs
mkdir -p "$out" "$work"
out=$(cd "$out" && pwd)
: > "$out/index.tsv"
venv() { # name, packages...
  local v="$work/venv-$1"; shift
  [ -x "$v/bin/python" ] || python3 -m venv "$v"
  "$v/bin/pip" install -q --disable-pip-version-check "$@" >&2
  echo "$v/bin/python"
}
record() { echo -e "$1\t$2" >> "$out/index.tsv"; }

# pytest: the probe, with SWE-bench's flags, colour off (as in the
# harness's containers) and forced on.
mkdir -p "$work/pytest" && cp "$here/probe/test_probe.py" "$work/pytest/"
for v in 5.4.3 6.2.5 7.4.4 8.3.5; do
  py=$(venv "pytest$v" "pytest==$v")
  plain=(); [ "$v" = 5.4.3 ] && plain=(--assert=plain) # 5.4's rewriter predates Python 3.11
  (cd "$work/pytest" && "$py" -m pytest -rA -p no:cacheprovider "${plain[@]}" test_probe.py > "$out/pytest-$v.log" 2>&1 || true)
  (cd "$work/pytest" && "$py" -m pytest -rA -p no:cacheprovider --color=yes "${plain[@]}" test_probe.py > "$out/pytest-$v-colour.log" 2>&1 || true)
  (cd "$work/pytest" && "$py" -m pytest --no-header -rA --tb=no -p no:cacheprovider "${plain[@]}" test_probe.py > "$out/pytest-$v-noheader.log" 2>&1 || true)
  (cd "$work/pytest" && "$py" -m pytest -v -p no:cacheprovider "${plain[@]}" test_probe.py > "$out/pytest-$v-verbose.log" 2>&1 || true)
  for p in pytest pytest_options pytest_v2 matplotlib seaborn; do
    record "pytest-$v.log" "$p"; record "pytest-$v-noheader.log" "$p"; record "pytest-$v-colour.log" "$p"
  done
  record "pytest-$v-verbose.log" pytest_v2; record "pytest-$v-verbose.log" seaborn
done

# Django: runtests.py from the sdist, on the probe module and a real one.
dj=4.2.17
if [ ! -d "$work/Django-$dj" ]; then
  (cd "$work" && python3 -m pip download -q --no-deps --no-binary :all: "django==$dj" -d . && tar xzf "Django-$dj.tar.gz" 2>/dev/null || tar xzf "django-$dj.tar.gz")
  [ -d "$work/Django-$dj" ] || mv "$work/django-$dj" "$work/Django-$dj"
fi
py=$(venv django "$work/Django-$dj")
mkdir -p "$work/Django-$dj/tests/prorl_probe" && touch "$work/Django-$dj/tests/prorl_probe/__init__.py"
cp "$here/probe/django_probe_tests.py" "$work/Django-$dj/tests/prorl_probe/tests.py"
(cd "$work/Django-$dj/tests" && "$py" runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 prorl_probe utils_tests.test_text > "$out/django-$dj.log" 2>&1 || true)
record "django-$dj.log" django

# sympy: bin/test from the sdist, on the probe and a real test file.
sy=1.12
if [ ! -d "$work/sympy-$sy" ]; then
  (cd "$work" && python3 -m pip download -q --no-deps --no-binary :all: "sympy==$sy" -d . && tar xzf "sympy-$sy.tar.gz")
fi
py=$(venv sympy "mpmath==1.3.0")
cp "$here/probe/test_sympy_probe.py" "$work/sympy-$sy/sympy/core/tests/test_sympy_probe.py"
# The sdist has sympy's runner (sympy/testing/runtests.py) but not the repo's
# bin/test, a thin argparse wrapper: "bin/test -C --verbose FILES" is
# sympy.test(FILES, colors=False, verbose=True).
(cd "$work/sympy-$sy" && PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' "$py" -c \
  'import sys, sympy; sys.exit(not sympy.test(*sys.argv[1:], colors=False, verbose=True))' \
  sympy/core/tests/test_sympy_probe.py sympy/core/tests/test_containers.py > "$out/sympy-$sy.log" 2>&1 || true)
record "sympy-$sy.log" sympy

# unittest -v (the format Django's runner extends).
mkdir -p "$work/unittest" && sed -e 's/from django.test import SimpleTestCase/SimpleTestCase = unittest.TestCase/' "$here/probe/django_probe_tests.py" > "$work/unittest/test_unit_probe.py"
(cd "$work/unittest" && python3 -m unittest -v test_unit_probe > "$out/unittest.log" 2>&1 || true)
record "unittest.log" django
echo "logs in $out" >&2
