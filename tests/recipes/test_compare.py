"""A recipe's ``compare:`` pairs: checked when the recipe is read, and laid out problem by problem in
report.md with the paired bootstrap of distill/eval/compare.py (eval directories written as the eval
stage writes them; no model)."""

import pytest

from reasonkit.errors import UserError
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.report import write_report

from ..distill.eval.test_compare import BASE, problems, write_eval


def _recipe(tmp_path, compare):
    data = {
        "out": str(tmp_path / "run"),
        "compare": compare,
        "steps": [
            {"name": "probs", "stage": "synth", "with": {"n": 4}},
            {"name": "eval_sft", "stage": "eval", "with": {"model": "m", "data": "${probs}"}},
            {"name": "eval_grpo", "stage": "eval", "with": {"model": "m", "data": "${probs}"}},
        ],
    }
    return parse_recipe(data, "r.yaml")


@pytest.mark.parametrize(
    "compare, message",
    [
        ("eval_sft", "r.yaml: compare: expected a list of [eval step A, eval step B] pairs"),
        ([["eval_sft"]], "r.yaml: compare[0]: expected [eval step A, eval step B], found ['eval_sft']"),
        (
            [["probs", "eval_grpo"]],
            "r.yaml: compare[0]: probs is not an eval step of this recipe (eval steps: eval_sft, eval_grpo)",
        ),
    ],
)
def test_bad_compare_pairs_are_refused_in_one_line(tmp_path, compare, message):
    with pytest.raises(UserError) as e:
        _recipe(tmp_path, compare)
    assert str(e.value) == message


def test_report_lays_out_the_paired_difference(tmp_path):
    recipe = _recipe(tmp_path, [["eval_sft", "eval_grpo"]])
    assert recipe.compare == (("eval_sft", "eval_grpo"),)
    (tmp_path / "run").mkdir()
    text = write_report(recipe).read_text()
    assert "- eval_grpo vs eval_sft: not evaluated yet" in text
    better = [min(4, s + 2) if i % 2 else s for i, s in enumerate(BASE)]  # B gains on every other problem
    write_eval(tmp_path / "run" / "eval_sft", problems(BASE))
    write_eval(tmp_path / "run" / "eval_grpo", problems(better))
    section = write_report(recipe).read_text().split("## Paired comparisons")[1]
    assert "eval_grpo - eval_sft: +0." in section and "eval_grpo better" in section
    assert "paired bootstrap over 60 problems" in section


def test_report_says_why_two_evals_cannot_be_paired(tmp_path):
    recipe = _recipe(tmp_path, [["eval_sft", "eval_grpo"]])
    write_eval(tmp_path / "run" / "eval_sft", problems(BASE))
    write_eval(tmp_path / "run" / "eval_grpo", problems(BASE), temperature=1.0)
    section = write_report(recipe).read_text().split("## Paired comparisons")[1]
    assert "eval_grpo vs eval_sft: not comparable:" in section and "temperature" in section
