"""distill eval with engine ray: the k samples generated on a local Ray cluster score as locally."""

import pytest

from reasonkit.distill.eval.run import EvalConfig, run_eval, summary_equal
from reasonkit.recipes.tasks.math import write_prompts

from ...helpers.ray import stage_rows

pytestmark = pytest.mark.slow


def test_eval_on_ray_gives_the_local_scores(tmp_path, ray_cluster, tiny_model_dir):
    data = write_prompts(tmp_path / "test.parquet", 6, seed=3, variant="aime", split="test")
    base = dict(
        model=tiny_model_dir,
        data=data,
        k=2,
        max_tokens=24,
        dtype="float32",
        verifier="int",
        backend="hf",
        batch_size=2,
    )
    local = run_eval(EvalConfig(**base, out=str(tmp_path / "local")))
    ray = run_eval(EvalConfig(**base, out=str(tmp_path / "ray"), engine="ray", replicas=2))
    assert summary_equal(local, ray)  # every score, count and the whole protocol
    assert ray["n_samples"] == 12
    # The random tiny model scores 0 either way: what must match is what was generated and verified.
    for sub in ("generations", "samples"):
        assert stage_rows(tmp_path / "ray" / sub) == stage_rows(tmp_path / "local" / sub), sub
