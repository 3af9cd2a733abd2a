"""The generate stage's config checks every field and reports every problem at once (issue 39 item 2: one
validation idiom, config.Checks), where it used to stop at the first."""

import pytest
import yaml
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.errors import FieldErrors
from reasonkit.gen.config import GenerateConfig

BASE = {"prompts": "p", "teacher": "t", "out": "o"}


def test_two_bad_fields_are_both_named():
    with pytest.raises(FieldErrors) as raised:
        GenerateConfig(**BASE, n=0, top_p=0)
    assert raised.value.fields == ["n: expected at least 1, found 0", "top_p: expected in (0, 1], found 0"]


def test_the_shared_engine_and_tool_checks_say_everything_too():
    """check_engine and check_tool_config each collect their problems; the config keeps every line of both."""
    with pytest.raises(FieldErrors) as raised:
        GenerateConfig(**BASE, engine="spark", replicas=0, tools="search", prefill_think=True, temperature=-1)
    assert raised.value.fields == ["temperature: expected >= 0, found -1"]
    assert raised.value.whole == [
        "--engine 'spark': expected one of local, ray",
        "--replicas 0: expected at least 1",
        "--tools search needs --corpus FILE (JSONL or Parquet with id and contents columns)",
        "--prefill-think does not apply to --tools (every turn would reopen a think block)",
    ]


def test_validate_reports_both_errors_of_a_generate_step(tmp_path):
    path = tmp_path / "two.yaml"
    step = {"name": "traces", "stage": "generate", "with": {"prompts": "p.jsonl", "teacher": "t", "n": 0, "top_p": 2}}
    path.write_text(yaml.safe_dump({"out": str(tmp_path / "run"), "steps": [step]}))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    line = next(ln for ln in result.output.splitlines() if ln.startswith("error:"))
    assert "traces.n: expected at least 1, found 0" in line, line
    assert "traces.top_p: expected in (0, 1], found 2" in line, line
