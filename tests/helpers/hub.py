"""Stage directories for the `distill push` tests: a generate stage (traces) that read a prompts
file and a filter stage (verdicts) over it with `rejected/`, `sft/` and a report, built with
StageWriter from literal rows and linked by `input_path` as the stages record it.
(`stages` is a fixture: a test module that uses it imports it.)"""

import json
from pathlib import Path

import pyarrow as pa
import pytest

from reasonkit.store import StageWriter, fingerprint, fingerprint_path

TOKEN = "hf_reasonkitTESTtoken0123456789abcdef"
TEACHER = "reasonkit/tiny-teacher"
# As gen/run.py records it: `config` is what decides the rows, `run_config` where it ran.
GEN_CONFIG = {
    "teacher": TEACHER,
    "backend": "openai",
    "n": 2,
    "temperature": 0.6,
    "top_p": 0.95,
    "max_tokens": 256,
    "seed": 0,
}
PRIVATE_URL = "http://10.1.2.3:8000/v1"
GEN_FP = fingerprint(GEN_CONFIG)
FILTER_CONFIG = {
    "verifier": "math",
    "lang": "en",
    "dedup": "exact",
    "decontam": ["evals/aime24.parquet"],
    "decontam_column": "problem",
}
# In the shape filters/report.py writes (Tally.report), trimmed to the fields the card reads.
REPORT = {
    "rows_in": 8,
    "funnel": [
        {"filter": "verify", "reason": "wrong_answer", "dropped": 2, "remaining": 6},
        {"filter": "decontam", "reason": "contaminated:aime24", "dropped": 1, "remaining": 5},
    ],
    "rows_out": 5,
    "contamination": {"aime24": 1},
}
RECIPE = "# distill run recipe.yaml\ngenerate:\n  n: 2\nfilter:\n  verifier: math\n"


def traces_of(ids: list[str], sample: int = 0, correct: bool | None = None) -> pa.Table:
    n = len(ids)
    cols = {
        "id": ids,
        "sample": pa.array([sample] * n, pa.int32()),
        "messages": [
            [{"role": "user", "content": f"What is {i}+1? Put the answer in \\boxed{{}}."}] for i in range(n)
        ],
        "completion": ["<think>add one</think>\\boxed{2}"] * n,
        "reasoning": ["add one"] * n,
        "response": ["\\boxed{2}"] * n,
        "finish_reason": ["stop"] * n,
        "prompt_tokens": pa.array([12] * n, pa.int32()),
        "completion_tokens": pa.array([7] * n, pa.int32()),
        "teacher": [TEACHER] * n,
        "gen_config": [GEN_FP] * n,
        "answer": ["2"] * n,
        "source": ["synthetic"] * n,
    }
    return pa.table(cols)


def verdicts_of(ids: list[str], keep: bool) -> pa.Table:
    t = traces_of(ids)
    n = len(ids)
    return (
        t.append_column("pred", pa.array(["2"] * n))
        .append_column("correct", pa.array([keep] * n))
        .append_column("lang_ratio", pa.array([1.0] * n, pa.float32()))
        .append_column("keep", pa.array([keep] * n))
        .append_column("drop_reason", pa.array([None if keep else "wrong_answer"] * n, pa.string()))
    )


@pytest.fixture
def stages(tmp_path) -> Path:
    """runs/filtered (verdicts, 2 shards, rejected/, sft/, report.json) <- runs/traces <- prompts.jsonl."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "p0", "problem": "1+1"}\n')
    gen = tmp_path / "runs" / "traces"
    with StageWriter(
        gen,
        stage="generate",
        kind="traces",
        config=GEN_CONFIG,
        keys=("id", "sample"),
        input_fingerprint=fingerprint_path(prompts),
    ) as w:
        w.commit(traces_of([f"p{i}" for i in range(4)]))
        w.finish(
            run_config={
                "prompts": str(prompts),
                "out": str(gen),
                "base_url": PRIVATE_URL,
                "api_key_env": "OPENAI_API_KEY",
            },
            backend_info={"backend": "openai", "openai": "1.99.0", "base_url": PRIVATE_URL},
            gen_config=GEN_FP,
        )
    out = tmp_path / "runs" / "filtered"
    with StageWriter(
        out,
        stage="filter",
        kind="verdicts",
        config=FILTER_CONFIG,
        keys=("id", "sample"),
        input_fingerprint=fingerprint_path(gen),
    ) as w:
        w.commit(verdicts_of(["p0", "p1"], keep=True))
        w.commit(verdicts_of(["p2"], keep=True))
        w.finish(input_path="runs/traces", versions={"math_verify": "0.8.0", "lingua": "2.1.0"})
    with StageWriter(
        out / "rejected", stage="filter", kind="verdicts", config=FILTER_CONFIG, keys=("id", "sample")
    ) as w:
        w.commit(verdicts_of(["p3"], keep=False))
        w.finish()
    with StageWriter(out / "sft", stage="filter", kind="sft", config=FILTER_CONFIG, keys=("id",)) as w:
        w.commit(
            pa.table(
                {
                    "id": ["p0", "p1", "p2"],
                    "messages": [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]] * 3,
                    "source": ["synthetic"] * 3,
                }
            )
        )
        w.finish()
    (out / "report.json").write_text(json.dumps(REPORT))
    return out


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
