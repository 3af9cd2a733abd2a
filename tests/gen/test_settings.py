"""gen/settings.py: the shared groups are declared once and reach the generate stage whole (issue 39 item 1)."""

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.config import ColumnMap
from reasonkit.distill.eval.config import EvalConfig
from reasonkit.distill.eval.run import generation_config
from reasonkit.engine import EngineSettings
from reasonkit.gen.config import GenerateConfig
from reasonkit.gen.settings import BackendSettings, PromptSettings, SamplingSettings, ToolSettings
from reasonkit.judges.backends import generation_config as judge_generation_config
from reasonkit.judges.config import CritiqueConfig, JudgeConfig

GROUPS = (SamplingSettings, PromptSettings, BackendSettings, ToolSettings, EngineSettings)
#: a value other than the default for each group field that a local vllm run accepts
CHANGED = dict(
    temperature=0.3,
    top_p=0.5,
    max_tokens=77,
    seed=5,
    system="be brief",
    instruction="",
    prefill_think=True,
    chat_template="t.jinja",
    api_key_env="KEY",
    concurrency=3,
    request_timeout=5.0,
    max_retries=1,
    tensor_parallel=2,
    gpu_memory_utilization=0.5,
    max_model_len=99,
    dtype="float32",
    batch_size=2,
    max_turns=2,
    search_k=1,
    tool_timeout=2.0,
    tool_workers=3,
)


def names(group) -> list[str]:
    return [f.name for f in dataclasses.fields(group)]


def test_every_stage_that_holds_a_model_holds_the_same_groups():
    for group in GROUPS:
        assert issubclass(GenerateConfig, group) and issubclass(EvalConfig, group), group
    for config in (JudgeConfig, CritiqueConfig):
        assert issubclass(config, SamplingSettings) and issubclass(config, BackendSettings)


def test_eval_hands_every_group_field_to_generate_unchanged():
    config = EvalConfig(model="m", data="d.parquet", out="o", k=3, **CHANGED)
    gen = generation_config(config, "m", Path("o"), ColumnMap(), replicas=1)
    for group in GROUPS:
        for name in names(group):
            assert getattr(gen, name) == getattr(config, name), name
    assert (gen.n, gen.out, gen.teacher) == (3, "o/generations", "m")
    assert set(CHANGED) <= {n for g in GROUPS for n in names(g)}  # the table above names no stale field


def test_eval_resolves_auto_replicas_for_generate():
    config = EvalConfig(model="m", data="d", out="o", data_parallel="auto")
    assert generation_config(config, "m", Path("o"), ColumnMap(), replicas=4).data_parallel == 4


@pytest.mark.parametrize("cls", [JudgeConfig, CritiqueConfig])
def test_a_judge_runs_its_model_with_its_whole_sampling_and_backend_groups(cls):
    values = {k: v for k, v in CHANGED.items() if k in names(SamplingSettings) + names(BackendSettings)}
    config = cls(input="i", out="o", judge="j", **values)
    gen = judge_generation_config(config, seed=11)
    for name in names(SamplingSettings) + names(BackendSettings):
        assert getattr(gen, name) == (11 if name == "seed" else getattr(config, name)), name


def test_a_judge_keeps_its_own_defaults_and_the_groups_help():
    assert (
        JudgeConfig.__dataclass_fields__["temperature"].default,
        CritiqueConfig.__dataclass_fields__["max_tokens"].default,
    ) == (0.0, 2048)
    assert (
        JudgeConfig.__dataclass_fields__["top_p"].metadata == SamplingSettings.__dataclass_fields__["top_p"].metadata
    )


@pytest.mark.parametrize("command", [["generate"], ["eval"], ["judge"], ["critique"]])
def test_every_sampling_field_is_a_flag_of_every_command_that_samples(command):
    out = CliRunner().invoke(cli, [*command, "--help"], terminal_width=200).output
    for name in names(SamplingSettings):
        assert f"--{name.replace('_', '-')} " in out, (command, name)


def test_a_flag_not_given_leaves_the_yaml_value(tmp_path):
    """generate: the dataclass default of a flag must not override --config's value (options.given)."""
    (tmp_path / "c.yaml").write_text(
        "generate:\n  temperature: -1\n  prompts: nowhere.jsonl\n  teacher: t\n  out: o\n"
    )
    result = CliRunner().invoke(cli, ["generate", "--config", str(tmp_path / "c.yaml"), "--top-p", "0.5"])
    # the YAML's value, not the default 0.6
    assert result.exit_code == 2 and "generate.temperature: expected >= 0, found -1.0" in result.output


def test_a_request_carries_every_sampling_field_with_its_own_seed():
    from reasonkit.gen.settings import values_of

    config = GenerateConfig(prompts="p", teacher="t", out="o", backend="hf", temperature=0.3, top_p=0.5, max_tokens=7)
    sampling = config.request_sampling(42)
    assert names(type(sampling)) == names(SamplingSettings)
    assert values_of(sampling, SamplingSettings) == {**values_of(config, SamplingSettings), "seed": 42}
