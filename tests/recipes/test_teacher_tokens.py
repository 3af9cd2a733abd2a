"""report.md's "Teacher tokens" table (recipes/teacher_tokens.py): each evaluated model's rung, and the teacher
tokens generated and scored upstream of it, read from what the steps recorded (issue 40 item 4)."""

import json
from pathlib import Path

from reasonkit.config import load_yaml
from reasonkit.recipes.recipe import parse_recipe, step_dir
from reasonkit.recipes.teacher_tokens import costs, rungs, section, teacher_generators

LADDER = Path(__file__).resolve().parents[2] / "recipes" / "distill-ladder.yaml"


def ladder(tmp_path):
    return parse_recipe(load_yaml(LADDER), str(LADDER), out=str(tmp_path))


def write(path: Path, data: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    name = "_manifest.json" if "tokens" in data else ("summary.json" if "pass@1" in data else "report.json")
    (path / name).write_text(json.dumps(data))


def test_each_eval_of_the_ladder_belongs_to_the_last_train_step_it_reads(tmp_path):
    recipe = ladder(tmp_path)
    owner = {e: rung for e, rung, _ in rungs(recipe.steps)}
    assert owner["eval_student_sft"] == "sft" and owner["eval_student_sft_kd"] == "sft_kd"
    assert owner["eval_student_opd_fresh"] == "opd_fresh" and owner["eval_student_grpo_band"] == "grpo_band"
    assert "eval_teacher" not in owner  # the teacher is no rung
    assert teacher_generators(recipe.steps) == ["traces", "traces_kd"]  # a teacher's samples, no student's


def test_a_rung_costs_the_teacher_tokens_upstream_of_it(tmp_path):
    recipe = ladder(tmp_path)

    def d(name):
        return Path(step_dir(recipe, name))

    write(d("traces"), {"tokens": 400_000})
    write(d("traces_kd"), {"tokens": 400_001})
    write(d("opd_sft"), {"distill": {"tokens": {"teacher_scored": 60_000}}})
    write(d("opd_fresh"), {"distill": {"tokens": {"teacher_scored": 70_000}}})
    write(d("eval_student_opd_fresh"), {"pass@1": 0.25})
    rows = {r["eval"]: r for r in costs(recipe)}
    assert rows["eval_student_sft"] | {"pass@1": 0} == {
        "eval": "eval_student_sft",
        "rung": "sft",
        "pass@1": 0,
        "generated": 400_000,
        "scored": 0,
    }
    assert (rows["eval_student_opd_sft"]["generated"], rows["eval_student_opd_sft"]["scored"]) == (400_000, 60_000)
    assert (rows["eval_student_opd_fresh"]["generated"], rows["eval_student_opd_fresh"]["scored"]) == (0, 70_000)
    assert rows["eval_student_opd_fresh"]["pass@1"] == 0.25
    assert (rows["eval_student_sft_kd"]["generated"], rows["eval_student_sft_kd"]["scored"]) == (400_001, 0)
    assert (rows["eval_student_grpo_band"]["generated"], rows["eval_student_grpo_band"]["scored"]) == (400_000, 0)
    text = section(recipe)
    assert "| eval_student_opd_fresh | opd_fresh | 0.250 | 0 | 70,000 | 70,000 |" in text, text
    assert "| eval_student_sft_kd | sft_kd | - | 400,001 | 0 | 400,001 |" in text, text


def test_a_step_that_has_not_recorded_its_tokens_shows_a_dash(tmp_path):
    text = section(ladder(tmp_path))  # nothing has run
    assert "| eval_student_opd_fresh | opd_fresh | - | 0 | - | - |" in text, text
