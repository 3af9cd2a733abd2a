"""`distill filter` from the command line: help, a run, and bad input as one line with exit 2."""

import json
import subprocess
import sys

from click.testing import CliRunner

from reasonkit.filters.command import filter as filter_command

from ..helpers.synthetic import trace, write_traces


def _traces(tmp_path):
    return str(write_traces(tmp_path / "traces", [trace("a", 0), trace("a", 1, response=r"\boxed{5}"), trace("b", 0)]))


def test_help_lists_every_flag_of_the_issue():
    result = CliRunner().invoke(filter_command, ["--help"])
    assert result.exit_code == 0
    for flag in (
        "--out",
        "--verifier",
        "--unverifiable",
        "--verify-timeout",
        "--lang",
        "--min-lang-ratio",
        "--drop-truncated / --keep-truncated",
        "--require-boxed",
        "--min-tokens",
        "--max-tokens",
        "--max-repetition",
        "--dedup",
        "--minhash-threshold",
        "--decontam",
        "--ngram",
        "--keep-per-prompt",
        "--select",
        "--workers",
        "--set",
        "--allow-incomplete",
        "--overwrite",
    ):
        assert flag in result.output, flag


def test_run_prints_the_funnel(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        filter_command,
        [_traces(tmp_path), "--out", str(out), "--verifier", "int", "--workers", "1", "--set", "seed=3", "-q"],
    )
    assert result.exit_code == 0, result.output
    assert "wrong" in result.output and "2 in" not in result.output and "3 in -> 1 out" in result.output
    report = json.loads((out / "report.json").read_text())
    assert report["rows_out"] == 1 and report["config"]["seed"] == 3  # exact dedup: a/0 and b/0 are the same text


def test_bad_flag_values_exit_2(tmp_path):
    result = CliRunner().invoke(
        filter_command, [_traces(tmp_path), "--out", str(tmp_path / "o"), "--verifier", "maths"]
    )
    assert result.exit_code == 2 and "maths" in result.output
    result = CliRunner().invoke(
        filter_command, [_traces(tmp_path), "--out", str(tmp_path / "o"), "--set", "verifyy=int"]
    )
    assert result.exit_code == 2 and "error: filter.verifyy: unknown key; did you mean verifier?" in result.output
    result = CliRunner().invoke(
        filter_command, [_traces(tmp_path), "--out", str(tmp_path / "o"), "--min-lang-ratio", "2"]
    )
    assert result.exit_code == 2 and "error: filter.min_lang_ratio: must be within [0, 1], got 2.0" in result.output
    assert not (tmp_path / "o").exists()


def test_through_the_distill_group(tmp_path):
    from reasonkit.cli import cli

    result = CliRunner().invoke(cli, ["filter", str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "error:" in result.output and "no such traces directory" in result.output


def test_the_run_says_where_its_time_went(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        filter_command, [_traces(tmp_path), "--out", str(out), "--verifier", "int", "--workers", "1"]
    )
    assert result.exit_code == 0, result.output
    line = [ln for ln in result.stderr.splitlines() if ln.startswith("time: ")]
    assert len(line) == 1, result.stderr
    steps = dict(part.rsplit(" ", 2)[:2] for part in line[0][len("time: ") :].split(", "))
    assert set(steps) >= {"setup", "read", "format", "verify", "language", "dedup keys", "write"}
    assert all(float(v) >= 0 for v in steps.values())
    assert "time" not in json.loads((out / "report.json").read_text())  # a log line, not a result


def test_command_module_imports_nothing_heavy():
    code = (
        "import sys, reasonkit.filters.command; "
        "print(sorted(m for m in ('numpy', 'pyarrow', 'lingua', 'math_verify', 'sympy', 'polars', 'torch') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
