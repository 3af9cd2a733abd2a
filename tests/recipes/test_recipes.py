import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from reasonkit import stages
from reasonkit.cli import cli
from reasonkit.config import load_yaml
from reasonkit.errors import UserError
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import run, validate

from ..helpers.recipes import overrides_for

RECIPES = sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.yaml"))


@dataclass(frozen=True)
class CountConfig:
    out: str = ""
    source: str = ""
    factor: int = 1
    overwrite: bool = False


CALLS: list[tuple[str, bool]] = []


def run_count(config: CountConfig) -> dict:
    """A stage that records each call and writes a file derived from its input."""
    CALLS.append((Path(config.out).name, config.overwrite))
    Path(config.out).mkdir(parents=True, exist_ok=True)
    rows = int(json.loads((Path(config.source) / "_manifest.json").read_text())["rows"]) if config.source else 1
    (Path(config.out) / "_manifest.json").write_text(json.dumps({"rows": rows * config.factor}))
    return {"rows": rows * config.factor}


class Direct(stages.StageSpec):
    def config_class(self):
        return CountConfig

    def run_function(self):
        return run_count


@pytest.fixture
def count_stage(monkeypatch):
    monkeypatch.setitem(stages.STAGES, "count", Direct("-", "-", inputs=("source",)))
    CALLS.clear()
    return CALLS


def chain(tmp_path, **over):
    data = {
        "out": str(tmp_path / "run"),
        "steps": [
            {"name": "problems", "stage": "synth", "with": {"n": 5, "split": "test"}},
            {"name": "double", "stage": "count", "with": {"source": "${problems}", "factor": 2}},
            {"name": "triple", "stage": "count", "with": {"source": "${double}", "factor": 3}},
        ],
    }
    data.update(over)
    return data


def test_run_chains_steps_and_skips_finished_ones(tmp_path, count_stage):
    recipe = parse_recipe(chain(tmp_path), "r.yaml")
    results = run(recipe, echo=lambda *_: None)
    assert results["problems"]["rows"] == 5 and results["triple"] == {"rows": 30}
    assert count_stage == [("double", False), ("triple", False)]
    lines = []
    run(recipe, echo=lines.append)
    assert count_stage == [("double", False), ("triple", False)], "nothing reruns"
    assert all(ln.startswith("[skip]") for ln in lines) and "same config" in lines[0]


def test_changed_config_reruns_that_step_and_the_ones_after(tmp_path, count_stage):
    run(parse_recipe(chain(tmp_path), "r.yaml"), echo=lambda *_: None)
    count_stage.clear()
    changed = parse_recipe(chain(tmp_path), "r.yaml", ["double.factor=4"])
    results = run(changed, echo=lambda *_: None)
    assert count_stage == [("double", True), ("triple", True)] and results["triple"] == {"rows": 60}


def test_from_and_only(tmp_path, count_stage):
    recipe = parse_recipe(chain(tmp_path), "r.yaml")
    with pytest.raises(UserError, match="earlier step 'problems' has not finished"):
        run(recipe, start="double", echo=lambda *_: None)
    run(recipe, echo=lambda *_: None)
    count_stage.clear()
    lines = []
    run(recipe, only="double", echo=lines.append)  # finished with the same config: nothing is redone
    run(recipe, start="double", echo=lines.append)
    assert count_stage == []
    assert lines[0].startswith("[skip] double (count): finished") and lines[0].endswith("pass --overwrite to redo it")
    assert len(lines) == 3 and all(line.startswith("[skip]") for line in lines)
    run(recipe, only="double", overwrite=True, echo=lambda *_: None)  # only --overwrite deletes
    assert count_stage == [("double", True)]
    count_stage.clear()
    run(recipe, start="double", overwrite=True, echo=lambda *_: None)
    assert count_stage == [("double", True), ("triple", True)]
    with pytest.raises(UserError, match="no step named 'tripel'; did you mean triple"):
        run(recipe, only="tripel", echo=lambda *_: None)


def test_a_copied_run_finds_its_finished_steps_and_reruns_what_changed(tmp_path, count_stage):
    """Identity is content: a run directory copied (or moved, or run from another clone) is the same run.
    Before, a step's fingerprint held its own OUT and its inputs' resolved paths: every step of a copy
    reran as "config changed", and --from on a copy refused ("earlier step has not finished")."""
    run(parse_recipe(chain(tmp_path), "r.yaml"), echo=lambda *_: None)
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    count_stage.clear()
    copy = parse_recipe(chain(tmp_path, out=str(tmp_path / "copy")), "r.yaml")
    lines = []
    run(copy, echo=lines.append)
    assert count_stage == [] and len(lines) == 3 and all(line.startswith("[skip]") for line in lines), lines
    run(copy, start="triple", overwrite=True, echo=lambda *_: None)
    assert count_stage == [("triple", True)]
    count_stage.clear()  # a value naming another step is still the config: changing it reruns
    rewired = chain(tmp_path, out=str(tmp_path / "copy"))
    rewired["steps"][2]["with"]["source"] = "${problems}"
    run(parse_recipe(rewired, "r.yaml"), echo=lambda *_: None)
    assert count_stage == [("triple", True)]


def test_cli_run_overwrite_flag_reaches_the_step(tmp_path, count_stage):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(chain(tmp_path)))
    assert CliRunner().invoke(cli, ["run", str(path)]).exit_code == 0
    count_stage.clear()
    again = CliRunner().invoke(cli, ["run", str(path), "--only", "triple"])
    assert again.exit_code == 0 and count_stage == [] and "pass --overwrite to redo it" in again.output
    redo = CliRunner().invoke(cli, ["run", str(path), "--only", "triple", "--overwrite"])
    assert redo.exit_code == 0, redo.output
    assert count_stage == [("triple", True)] and "[run]  triple (count): overwrite requested" in redo.output


def test_an_interrupted_step_resumes_without_overwrite(tmp_path, count_stage, monkeypatch):
    recipe = parse_recipe(chain(tmp_path), "r.yaml")

    def boom(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(Direct, "run_function", lambda self: boom)
    with pytest.raises(KeyboardInterrupt):
        run(recipe, echo=lambda *_: None)
    monkeypatch.setattr(Direct, "run_function", lambda self: run_count)
    lines = []
    run(recipe, echo=lines.append)
    assert count_stage == [("double", False), ("triple", False)]
    assert any("double (count): resuming" in ln for ln in lines)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(outt="x"), "r.yaml: outt: unknown key; did you mean out?"),
        (lambda d: d["steps"][1].update(stage="cuont"), "steps[1].stage: unknown stage 'cuont'; did you mean count?"),
        (lambda d: d["steps"][1].update(wiht={}), "steps[1].wiht: unknown key; did you mean with?"),
        (lambda d: d["steps"][1]["with"].update(factr=2), "double.factr: unknown key; did you mean factor?"),
        (lambda d: d["steps"][1]["with"].update(source="${triple}"), "reads ${triple}, which a later step writes"),
        (
            lambda d: d["steps"][1]["with"].update(source="${nope}"),
            "reads ${nope}, which no step of this recipe writes",
        ),
        (
            lambda d: d["steps"][1]["with"].update(source="/no/such/dir"),
            "with.source: /no/such/dir: no such file or directory",
        ),
        (lambda d: d["steps"][2].update(name="double"), "steps[2].name: duplicate step name 'double'"),
        (lambda d: d["steps"][0]["with"].update(n="five"), "problems.n: expected an integer, found 'five'"),
        (lambda d: d["steps"][0]["with"].update(out="x"), "with.out: set by the runner"),
    ],
)
def test_validate_names_what_is_wrong_and_where(tmp_path, count_stage, mutate, message):
    data = chain(tmp_path)
    mutate(data)
    with pytest.raises(UserError) as e:
        validate(parse_recipe(data, "r.yaml"))
    assert message in str(e.value)
    assert count_stage == []


def test_set_override_errors():
    data = {"steps": [{"name": "a", "stage": "synth"}]}
    with pytest.raises(UserError, match="no step named 'b'"):
        parse_recipe(data, "r.yaml", ["b.n=3"])
    with pytest.raises(UserError, match="expected STEP.KEY=VALUE"):
        parse_recipe(data, "r.yaml", ["n=3"])


def test_cli_validate_and_run_exit_2_on_a_bad_recipe(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"steps": [{"name": "a", "stage": "genrate"}]}))
    for command in ("validate", "run"):
        result = CliRunner().invoke(cli, [command, str(path)])
        assert result.exit_code == 2
        assert "unknown stage 'genrate'; did you mean generate?" in result.output


def test_validate_reports_every_error_of_a_recipe_at_once(tmp_path):
    """Three errors in two steps (a type, an unknown key, a config's own check): one exit 2 names all three, each at
    its field's path, where the first error used to hide the other two."""
    path = tmp_path / "three.yaml"
    steps = [
        {"name": "problems", "stage": "synth", "with": {"n": 0, "seedd": 1}},
        {"name": "tiny", "stage": "student", "with": {"tokenizer": str(tmp_path), "hidden_size": "wide"}},
    ]
    path.write_text(yaml.safe_dump({"out": str(tmp_path / "run"), "steps": steps}))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    line = next(ln for ln in result.output.splitlines() if ln.startswith("error:"))
    assert line.startswith(f"error: {path}: 3 problems: "), line
    assert "problems.seedd: unknown key; did you mean seed?" in line
    assert "problems.n: expected a positive number of problems, found 0" in line
    assert "tiny.hidden_size: expected an integer, found 'wide'" in line


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_shipped_recipe_validates(path, tmp_path, teacher_dir):
    data = load_yaml(path)
    validate(parse_recipe(data, str(path), overrides_for(path, teacher_dir), out=str(tmp_path)))
    header = path.read_text().splitlines()[:15]
    assert any("distill run" in line or "distill quickstart" in line for line in header), "header shows the command"
    assert any("--set" in line for line in header), "header shows how to override a value"


def test_validate_loads_no_model_code(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(chain(tmp_path, steps=chain(tmp_path)["steps"][:1])))
    probe = (
        "import sys\nfrom reasonkit.cli import cli\n"
        f"try:\n    cli(['validate', {str(recipe)!r}])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('HEAVY', [m for m in ('torch', 'vllm', 'transformers', 'trl') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_resume_and_threads_leave_a_train_steps_fingerprint_alone(tmp_path):
    """`--set sft.resume=true` used to look like a new config, and the runner deleted the checkpoints."""
    data = {
        "out": str(tmp_path / "run"),
        "steps": [
            {
                "name": "sft",
                "stage": "train",
                "with": {"method": "sft", "student": str(tmp_path), "data": str(tmp_path)},
            }
        ],
    }
    base = validate(parse_recipe(data, "r.yaml"))[0].fingerprint
    for item in ("sft.resume=true", "sft.threads=1", "sft.overwrite=true"):
        assert validate(parse_recipe(data, "r.yaml", [item]))[0].fingerprint == base, item
    assert validate(parse_recipe(data, "r.yaml", ["sft.lr=0.1"]))[0].fingerprint != base


def test_a_model_retrained_at_the_same_path_reruns_the_steps_that_read_it(tmp_path):
    """Step fingerprints hold the content of what a step reads from outside the recipe: new weights
    under the teacher's path change generate's fingerprint and every step after it; new prompts
    bytes too; the student's weights change only the train step."""
    teacher, student = tmp_path / "teacher", tmp_path / "student"
    for model in (teacher, student):
        model.mkdir()
        (model / "config.json").write_text("{}")
        (model / "model.safetensors").write_bytes(b"weights v1")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"problem": "1+1?", "answer": "2"}\n')
    data = {
        "out": str(tmp_path / "run"),
        "steps": [
            {"name": "traces", "stage": "generate", "with": {"prompts": str(prompts), "teacher": str(teacher)}},
            {"name": "verified", "stage": "filter", "with": {"traces": "${traces}"}},
            {
                "name": "sft",
                "stage": "train",
                "with": {"method": "sft", "student": str(student), "data": "${verified}/sft"},
            },
        ],
    }

    def fingerprints():
        return [p.fingerprint for p in validate(parse_recipe(data, "r.yaml"))]

    base = fingerprints()
    assert fingerprints() == base
    (teacher / "model.safetensors").write_bytes(b"weights v2")
    retrained = fingerprints()
    assert all(a != b for a, b in zip(base, retrained)), "generate and everything downstream"
    (student / "model.safetensors").write_bytes(b"weights v2")
    new_student = fingerprints()
    assert new_student[:2] == retrained[:2] and new_student[2] != retrained[2]
    prompts.write_text('{"problem": "2+2?", "answer": "4"}\n')
    assert fingerprints()[0] != new_student[0]


def test_speed_only_engine_args_leave_a_steps_fingerprint_alone(tmp_path):
    """Resubmitting a half-done generate step with more sequences in flight resumes it; an
    argument that changes the numbers (kv_cache_dtype) is a new config."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"problem": "1+1?", "answer": "2"}\n')
    data = {
        "out": str(tmp_path / "run"),
        "steps": [
            {
                "name": "traces",
                "stage": "generate",
                "with": {"prompts": str(prompts), "teacher": "org/teacher", "engine_args": {"max_num_seqs": 64}},
            }
        ],
    }
    base = validate(parse_recipe(data, "r.yaml"))[0].fingerprint
    assert validate(parse_recipe(data, "r.yaml", ["traces.engine_args.max_num_seqs=256"]))[0].fingerprint == base
    assert validate(parse_recipe(data, "r.yaml", ["traces.data_parallel=2"]))[0].fingerprint == base
    assert validate(parse_recipe(data, "r.yaml", ["traces.engine_args.kv_cache_dtype=fp8"]))[0].fingerprint != base
