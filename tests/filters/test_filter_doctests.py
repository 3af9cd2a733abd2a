"""The examples in the filters' docstrings run, and the command module stays light."""

import doctest
import importlib
import subprocess
import sys

import pytest

MODULES = ["base", "completions", "config", "decontam", "dedup", "math.extract", "format", "language", "math.check", "math.pool", "report",
           "select", "math.spelling", "synthetic", "text", "math.unboxed", "math.verify", "words"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(f"reasonkit.filters.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_command_module_imports_nothing_heavy():
    code = ("import sys, reasonkit.filters.command; "
            "print(sorted(m for m in ('numpy', 'pyarrow', 'lingua', 'math_verify', 'sympy', 'polars', 'torch') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
