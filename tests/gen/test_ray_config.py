"""Engine settings without a cluster: flags and recipe keys checked before any work, one clear
error for a missing Ray or an unreachable cluster, and nothing imports Ray unless asked to."""

import socket
import subprocess
import sys

import pytest

from reasonkit.config import from_dict
from reasonkit.errors import UserError
from reasonkit.filters.config import FilterConfig
from reasonkit.gen.run import GenerateConfig

from ..helpers.ray import distill
from ..helpers.synthetic import synthetic_rows, write_traces


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on return: nobody listens there


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"engine": "ray", "replicas": 0}, "--replicas 0: expected at least 1"),
        ({"replicas": 2}, "--replicas 2 needs --engine ray"),
        ({"ray_address": "auto"}, "--ray-address auto needs --engine ray"),
        ({"engine": "spark"}, "expected one of local, ray"),
    ],
)
def test_bad_engine_settings_are_refused(settings, message):
    for cls, base in (
        (GenerateConfig, {"prompts": "p", "teacher": "t", "out": "o"}),
        (FilterConfig, {"traces": "t", "out": "o"}),
    ):
        with pytest.raises(UserError, match=message.replace("(", r"\(")):
            from_dict(cls, {**base, **settings}, "stage")


def test_data_parallel_is_the_local_engines():
    with pytest.raises(UserError, match="with --engine ray use --replicas 4"):
        GenerateConfig(prompts="p", teacher="t", out="o", engine="ray", data_parallel=4)


def test_recipe_with_engine_keys_validates(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"""
out: {tmp_path / "run"}
steps:
  - name: traces
    stage: generate
    with: {{prompts: {tmp_path / "p.parquet"}, teacher: some/model, engine: ray, replicas: 16,
            tensor_parallel: 2, ray_address: auto}}
  - name: verified
    stage: filter
    with: {{traces: "${{traces}}", engine: ray, replicas: 4}}
  - name: scores
    stage: eval
    with: {{model: some/model, data: {tmp_path / "p.parquet"}, engine: ray, replicas: 8}}
""")
    (tmp_path / "p.parquet").write_text("")
    ok = subprocess.run(distill("validate", [str(recipe)]), capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    recipe.write_text(recipe.read_text().replace("replicas: 4", "replicas: 0"))
    bad = subprocess.run(distill("validate", [str(recipe)]), capture_output=True, text=True)
    assert bad.returncode == 2 and "--replicas 0: expected at least 1" in bad.stderr


def run_cli(args, *, hide_ray=False):
    """``distill ARGS`` in a fresh interpreter; ``hide_ray``: as if Ray were not installed."""
    hide = "sys.modules['ray'] = None; " if hide_ray else ""
    code = f"import sys; {hide}sys.argv = ['distill'] + {args!r}; from reasonkit.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.fixture
def traces(tmp_path) -> str:
    write_traces(tmp_path / "traces", synthetic_rows(2, "int", samples=2), shard_rows=4)
    return str(tmp_path / "traces")


def assert_one_line_error(result, *fragments):
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_engine_ray_without_ray_installed_says_what_to_install(traces, tmp_path):
    result = run_cli(["filter", traces, "--out", str(tmp_path / "out"), "--engine", "ray"], hide_ray=True)
    assert_one_line_error(result, "--engine ray", "pip install 'reasonkit[ray]'")
    assert not (tmp_path / "out").exists()


def test_unreachable_ray_address_is_one_clear_error(traces, tmp_path, tiny_model_dir):
    address = f"127.0.0.1:{closed_port()}"
    result = run_cli(["filter", traces, "--out", str(tmp_path / "out"), "--engine", "ray", "--ray-address", address])
    assert_one_line_error(result, f"--ray-address {address}", "no Ray cluster reachable")
    assert not (tmp_path / "out").exists()
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "problem": "What is 2 * 3?"}\n')
    generate = [
        "generate",
        "--prompts",
        str(prompts),
        "--teacher",
        tiny_model_dir,
        "--out",
        str(tmp_path / "g"),
        "--backend",
        "hf",
        "--max-tokens",
        "16",
        "--engine",
        "ray",
        "--ray-address",
    ]
    assert_one_line_error(run_cli(generate + [address]), f"--ray-address {address}", "no Ray cluster reachable")
    assert_one_line_error(run_cli(generate + ["nowhere"]), "--ray-address nowhere: expected host:port")
    assert not (tmp_path / "g").exists()


def test_commands_import_ray_only_when_it_runs_them(traces, tmp_path):
    code = (
        "import sys; from click.testing import CliRunner; from reasonkit.cli import cli; "
        "[CliRunner().invoke(cli, [c, '--help']) for c in ('generate', 'filter', 'eval')]; "
        f"r = CliRunner().invoke(cli, ['filter', {traces!r}, '--out', {str(tmp_path / 'out')!r}, '--workers', '1', "
        "'--lang', 'none', '-q']); print(r.exit_code, 'ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "0 False", out.stdout[-2000:] + out.stderr[-2000:]
