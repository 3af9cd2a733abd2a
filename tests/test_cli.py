import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from reasonkit import __version__
from reasonkit.cli import COMMANDS, cli
from reasonkit.store import StageWriter

DISTILL = Path(sys.executable).parent / "distill"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name):
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_version():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def test_help_is_instant_and_imports_nothing_heavy():
    probe = (
        "import sys, time; t = time.perf_counter()\n"
        "from reasonkit.cli import cli\n"
        "try:\n    cli(['--help'], prog_name='distill')\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'vllm', 'transformers', 'trl', 'peft', 'pyarrow', 'polars') if m in sys.modules]\n"
        "print('RESULT', time.perf_counter() - t, heavy)\n"
    )
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - start
    line = next(l for l in out.splitlines() if l.startswith("RESULT"))
    assert line.endswith("[]"), f"--help imported heavy modules: {line}"
    assert wall < 1.0, f"`distill --help` took {wall:.2f}s including interpreter start"


def test_console_script_is_installed():
    out = subprocess.run([str(DISTILL), "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "generate" in out.stdout


def test_user_errors_are_one_line_on_stderr_with_exit_2(tmp_path):
    out = subprocess.run([str(DISTILL), "inspect", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: {tmp_path}: not a stage directory (no _manifest.json)"
    assert "Traceback" not in out.stderr


def test_inspect_shows_a_store_directory(tmp_path):
    w = StageWriter(tmp_path, stage="demo", kind=None, config={"n": 1}, keys=("id",))
    w.commit(pa.table({"id": ["a", "b"], "completion_tokens": pa.array([5, 7], pa.int32())}))
    runner = CliRunner()
    result = runner.invoke(cli, ["inspect", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "INCOMPLETE" in result.output and "rows=2" in result.output and "completion tokens=12" in result.output
    w.finish()
    info = json.loads(runner.invoke(cli, ["inspect", str(tmp_path), "--json"]).output)
    assert info["complete"] and info["rows"] == 2 and info["sample_row"] == {"id": "a", "completion_tokens": 5}
    assert info["schema"] == {"id": "string", "completion_tokens": "int32"}
