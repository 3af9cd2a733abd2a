"""A stage that will run model programs starts the sandbox first: where it cannot start, one error
(exit 2, one line, nothing written), never a column of unverifiable rows; ``--sandbox none`` is the
only way to run without namespaces, and it says so (a warning, ``sandbox`` in report.json and the
manifest, ``no-namespaces`` in the rows' isolation)."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonkit import sandbox
from reasonkit.errors import UserError
from reasonkit.sandbox import modes

from ..filters.code.test_run import rows
from ..helpers.as_nobody import NOBODY, run_as_nobody
from ..helpers.synthetic import write_traces

DISTILL = str(Path(sys.executable).parent / "distill")


@pytest.fixture
def no_namespaces(monkeypatch):
    """This process as on a machine without user namespaces or unshare."""
    monkeypatch.setattr(modes, "available_mode", lambda: "none")
    monkeypatch.delenv(sandbox.ENV_MODE, raising=False)


def test_without_namespaces_auto_refuses_and_names_the_fix(no_namespaces):
    with pytest.raises(sandbox.SandboxError, match="no isolation is possible here.*bubblewrap.*--sandbox none"):
        sandbox.run("print(1)")
    assert sandbox.resolve_mode("none") == "none"  # named: allowed


def test_filter_without_a_sandbox_is_one_line_exit_2_nothing_written(tmp_path):
    write_traces(tmp_path / "traces", rows(), shard_rows=4)
    empty = tmp_path / "bin"
    empty.mkdir()  # PATH without unshare: no namespace can be made
    done = subprocess.run(
        [
            DISTILL,
            "filter",
            str(tmp_path / "traces"),
            "--out",
            str(tmp_path / "out"),
            "--verifier",
            "code",
            "--lang",
            "none",
            "--dedup",
            "none",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(empty)},
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: distill filter --verifier code: no isolation is possible")
    assert "--sandbox none" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("stage", ["eval", "generate", "train"])
def test_every_program_running_stage_checks_the_sandbox_before_its_input(stage, no_namespaces, tmp_path):
    # The input does not exist: the sandbox's error comes first, so it was checked before reading.
    missing, out = str(tmp_path / "missing.parquet"), str(tmp_path / "out")
    if stage == "eval":
        from reasonkit.distill.eval.run import EvalConfig, run_eval

        call = lambda: run_eval(EvalConfig(model="m", data=missing, out=out, verifier="code"))  # noqa: E731
    elif stage == "generate":
        from reasonkit.gen.run import GenerateConfig, generate

        call = lambda: generate(GenerateConfig(prompts=missing, teacher="t", out=out, tools="python"))  # noqa: E731
    else:
        from reasonkit.distill.config import TrainConfig
        from reasonkit.distill.train import train

        call = lambda: train(
            TrainConfig(
                method="grpo",
                student="m",
                data=missing,
                out=out,  # noqa: E731
                rewards={"accuracy": 1.0, "code": 1.0},
            )
        )
    with pytest.raises(UserError, match="no isolation is possible here"):
        call()
    assert not Path(out).exists()


def test_sandbox_option_sets_the_mode_for_the_command_only(monkeypatch):
    import click

    from reasonkit.sandbox.stage import sandbox_option

    seen = []

    @click.command()
    @sandbox_option
    def probe():
        seen.append(os.environ.get(sandbox.ENV_MODE))

    monkeypatch.delenv(sandbox.ENV_MODE, raising=False)
    assert CliRunner().invoke(probe, ["--sandbox", "none"]).exit_code == 0
    assert seen == ["none"] and sandbox.ENV_MODE not in os.environ  # restored after the command


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make the non-root caller")
def test_sandbox_none_opts_in_warns_and_is_recorded(tmp_path):
    # A non-root user on a machine without namespaces (no unshare on PATH): --sandbox none runs the
    # programs as that user; the run says so everywhere it is read later.
    work = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="reasonkit-none-"))
    try:
        write_traces(work / "traces", rows(), shard_rows=4)
        for path in [work, *work.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        script = (
            f"import os, sys; os.environ['PATH'] = '/nonexistent'; sys.argv = ['distill', 'filter', "
            f"'{work}/traces', '--out', '{work}/out', '--verifier', 'code', '--lang', 'none', "
            "'--dedup', 'none', '--sandbox', 'none', '--verify-timeout', '1'];\n"
            "from reasonkit.cli import main; main()"
        )
        done = run_as_nobody([sys.executable, "-c", script])
        assert done.returncode == 0, done.stderr[-2000:]
        assert "warning: --sandbox none" in done.stderr
        report = json.loads((work / "out" / "report.json").read_text())
        manifest = json.loads((work / "out" / "_manifest.json").read_text())
        assert report["sandbox"] == "none" and manifest["sandbox"] == "none"
        # no cgroup for this user: said in the manifest (issue 38 item 10), memory and CPU per process only
        assert (
            "no-cgroup" in manifest["sandbox_isolation"]
            and report["sandbox_isolation"] == manifest["sandbox_isolation"]
        )
        import pyarrow.parquet as pq

        isolation = pq.read_table(work / "out" / "part-00000.parquet").column("isolation").to_pylist()
        assert isolation and all(value.startswith("no-namespaces") and "no-cgroup" in value for value in isolation)
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)


def test_a_recipes_sandbox_key_holds_for_its_steps_only(monkeypatch):
    from reasonkit.recipes import runner as recipe_runner
    from reasonkit.recipes.recipe import parse_recipe

    steps = [{"name": "f", "stage": "filter", "with": {"traces": "t", "verifier": "code"}}]
    with pytest.raises(UserError, match="r.yaml: sandbox: expected one of auto, none; found 'off'"):
        parse_recipe({"steps": steps, "sandbox": "off"}, "r.yaml")
    recipe = parse_recipe({"steps": steps, "sandbox": "none"}, "r.yaml")
    monkeypatch.delenv(sandbox.ENV_MODE, raising=False)
    monkeypatch.setattr(recipe_runner, "_run", lambda recipe, **options: os.environ.get(sandbox.ENV_MODE))
    assert recipe_runner.run(recipe) == "none" and sandbox.ENV_MODE not in os.environ
    assert recipe_runner.run(parse_recipe({"steps": steps}, "r.yaml")) is None
