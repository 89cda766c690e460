"""Tests whose ids and outcomes have the shapes SWE-bench's parsers must
read: parameters with spaces, brackets, paths and globs, failures with
" - " in the message, errors in setup and teardown, skips, xfail/xpass,
classes, unicode, and output that looks like a status line."""

import pytest


@pytest.fixture
def broken():
    raise RuntimeError("setup failed")


@pytest.fixture
def teardown_fails():
    yield
    raise RuntimeError("teardown failed")


def test_ok():
    pass


def test_fail():
    assert 1 == 2, "one - two"  # noqa: PLR0133 - a failure on purpose


def test_error_in_setup(broken):
    pass


def test_error_in_teardown(teardown_fails):
    pass


@pytest.mark.skip(reason="not today")
def test_skip():
    pass


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False  # noqa: B011 - a test file as real suites write it


@pytest.mark.xfail(reason="known")
def test_xpass():
    pass


@pytest.mark.parametrize("exc", [(AttributeError, "x y"), ValueError, (TypeError,)])
def test_xfail_raises(exc):
    assert exc is not ValueError


@pytest.mark.parametrize(
    "expr",
    ["x[0]", "a b", "[1]", "/abs/path/file.txt", "//net/share", "p*q", "tab\there", "MouseButton.LEFT", "é"],
)
def test_param(expr):
    assert expr != "a b"


class TestKlass:
    def test_gamma(self):
        pass

    def test_prints_status_lines(self):
        print("PASSED test_probe.py::test_fail")
        print("FAILED test_probe.py::test_ok - fake")
        assert True

    def test_delta_fails(self):
        raise KeyError("delta")


def test_unicode_ñ():
    pass
