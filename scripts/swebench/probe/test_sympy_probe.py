"""Tests run by sympy's bin/test: passes, failures, errors, skips."""

from sympy import Symbol, simplify
from sympy.testing.pytest import XFAIL, skip


def test_ok():
    x = Symbol("x")
    assert simplify(x + x) == 2 * x


def test_fail():
    assert Symbol("x") == Symbol("y")


def test_error():
    raise ValueError("probe")


def test_skipped():
    skip("not today")


@XFAIL
def test_xfail():
    assert False  # noqa: B011 - a test file as real suites write it
