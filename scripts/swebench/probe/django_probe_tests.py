"""A Django test module run by Django's own runtests.py: docstrings (the
runner prints their first line), failures, errors, skips, expected
failures and output between the test name and its result."""

import sys
import unittest

from django.test import SimpleTestCase


class ProbeTests(SimpleTestCase):
    def test_ok(self):
        pass

    def test_docstring(self):
        """Slugify handles unicode ... and more."""

    def test_fail(self):
        self.assertEqual(1, 2)

    def test_error(self):
        raise KeyError("probe")

    @unittest.skip("not today")
    def test_skip(self):
        pass

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.assertEqual(1, 2)

    def test_output_before_result(self):
        sys.stderr.write("some output\n")

    def test_docstring_fails(self):
        """A failing test with a docstring."""
        self.fail("no")
