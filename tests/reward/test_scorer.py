"""The reward-model scorer (reward/scorer.py): identical inputs run once, and a training run's output
directory is read as the model it saved. ``distill score``'s own numbers are tests/judges/score/test_run.py's."""

import pytest

from reasonkit.reward.scorer import Scorer, inspect_model

from ..helpers.score import reward_models


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return reward_models(tmp_path_factory.mktemp("rms"))


def test_identical_rows_run_once(models):
    scorer = Scorer(inspect_model(models["rm"]))
    seen = []
    forward = scorer.forward
    scorer.forward = lambda batch: seen.extend(batch) or forward(batch)
    prompt = [{"role": "user", "content": "What is 2 * 3?"}]
    got = scorer.score([prompt] * 5, ["6", "7", "6", None, "6"], batch_size=2)
    assert len(seen) == 2  # "6" and "7", each once; None has no text
    assert got[0] == got[2] == got[4] and got[3] == (None, None) and got[0][0] != got[1][0]


def test_a_training_output_directory_is_read_as_its_saved_model(models, tmp_path):
    import shutil

    shutil.copytree(models["rm"], tmp_path / "run" / "model")  # `distill train --method rm --full` saves OUT/model
    assert inspect_model(str(tmp_path / "run")).base == str(tmp_path / "run" / "model")
    shutil.copytree(models["rm"], tmp_path / "run" / "merged")  # --merge: the merged model is taken first
    assert inspect_model(str(tmp_path / "run")).base == str(tmp_path / "run" / "merged")
