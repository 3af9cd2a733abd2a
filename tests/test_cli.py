import json
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
        "heavy = [m for m in ('torch', 'vllm', 'transformers', 'trl', 'peft', 'pyarrow', 'polars') if m in "
        "sys.modules]\n"
        "print('RESULT', time.perf_counter() - t, heavy)\n"
    )
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - start
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULT"))
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


def test_inspect_shows_each_config_with_the_line_that_loads_it(tmp_path):
    """Issue 37: the configs a directory offers, each with one line of Python that loads it (run here as
    printed); a directory from before the card says so, and --write-card gives it one."""
    import datasets

    from .helpers.synthetic import trace, write_traces

    out = write_traces(tmp_path / "traces", [trace(f"p{i}") for i in range(3)], shard_rows=2)
    sft = StageWriter(out / "sft", stage="filter", kind="sft", config={}, keys=("id",))
    sft.commit(pa.table({"id": ["p0"], "messages": [[{"role": "user", "content": "q"}]]}))
    sft.finish()
    info = json.loads(CliRunner().invoke(cli, ["inspect", str(out), "--json"]).output)
    assert info["card"] == "written"
    assert [(c["config"], c["table"], c["rows"]) for c in info["configs"]] == [
        ("default", "traces", 3),
        ("sft", "sft", 1),
    ]
    text = CliRunner().invoke(cli, ["inspect", str(out)]).output
    for config in info["configs"]:
        assert config["load"] in text.replace("\n", "")
        cached = {"load_dataset": lambda *a, **k: datasets.load_dataset(*a, **k, cache_dir=str(tmp_path / "hf"))}
        ds = eval(config["load"], cached)  # the line as printed
        assert ds.num_rows == config["rows"]

    (out / ".huggingface.yaml").unlink()  # as a directory written before the card
    result = CliRunner().invoke(cli, ["inspect", str(out)])
    assert "dataset card: missing" in result.output and "--write-card" in result.output
    assert CliRunner().invoke(cli, ["inspect", str(out), "--write-card"]).exit_code == 0
    assert "dataset card: written" in CliRunner().invoke(cli, ["inspect", str(out)]).output
    assert datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "hf2")).num_rows == 3
    # a directory of stages (an eval's): its configs, the first what load_dataset(DIR) reads
    (tmp_path / "eval").mkdir()
    from reasonkit.store import write_card

    write_card(tmp_path / "eval", layout=["problems.parquet", "samples"], stage="eval")
    info = json.loads(CliRunner().invoke(cli, ["inspect", str(tmp_path / "eval"), "--json"]).output)
    assert [(c["config"], c["rows"], c["load"]) for c in info["configs"]] == [
        ("problems", None, f'load_dataset("{tmp_path / "eval"}", split="train")'),
        ("samples", None, f'load_dataset("{tmp_path / "eval"}", "samples", split="train")'),
    ]
