"""Hugging Face datasets by reference (dataset_ref.py): splits, configs, and a folder in the Hub's
layout read exactly as its Hub id, through ``datasets.load_dataset``.

The folders are shaped like the three datasets the GPU recipes name (column names and types as
the Hub has them): HuggingFaceH4/aime_2024 (one ``train`` split), HuggingFaceH4/MATH-500 (one
``test`` split) and open-r1/OpenR1-Math-220k (configs default/extended/all, each one ``train``
split, named by its README's ``configs:``), laid out as ``huggingface-cli download --repo-type
dataset ID --local-dir DIR`` leaves them on an offline cluster.
"""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from reasonkit.errors import UserError
from reasonkit.readers import ColumnMap, read_prompts, read_table

AIME = [
    (
        60,
        "Every morning Aya goes for a 9-kilometer-long walk and stops at a coffee shop afterwards. How many minutes "
        "does the walk take her?",
        "204",
    ),
    (61, "Let ABC be a triangle inscribed in circle omega. Find the length AP written as m/n, and give m + n.", "113"),
    (
        62,
        "Each vertex of a regular octagon is independently colored either red or blue with equal probability.",
        "371",
    ),
]
MATH500 = [
    (
        "Convert the point (0,3) in rectangular coordinates to polar coordinates in the form (r, theta).",
        "\\left( 3, \\frac{\\pi}{2} \\right)",
    ),
    (
        "Define p as the sum over k of 1/k^2 and q as the sum over k of 1/k^3; write the double sum in terms of p and "
        "q.",
        "p - q",
    ),
]
OPENR1 = {
    "default": [
        "A train leaves the station at noon travelling at sixty miles per hour towards the coast; when does it arrive?",  # noqa: E501
        "Find all real x such that x squared minus five x plus six equals zero, and give their sum.",
    ],
    "extended": ["Prove that the sum of the first n odd numbers is n squared, then compute it for n equal to twelve."],
    "all": [
        "A train leaves the station at noon travelling at sixty miles per hour towards the coast; when does it arrive?",  # noqa: E501
        "Prove that the sum of the first n odd numbers is n squared, then compute it for n equal to twelve.",
    ],
}
OPENR1_README = """---
license: apache-2.0
configs:
- config_name: all
  data_files:
  - split: train
    path: all/train-*
- config_name: default
  data_files:
  - split: train
    path: data/train-*
- config_name: extended
  data_files:
  - split: train
    path: extended/train-*
---
# OpenR1-Math-220k (shape only)
"""


@pytest.fixture(scope="module", autouse=True)
def datasets_cache(tmp_path_factory):
    """datasets' Arrow cache in the test's own folder, not the user's ~/.cache."""
    import datasets

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path_factory.mktemp("hf_datasets_cache"))
        yield


def _write(path, table):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


@pytest.fixture(scope="module")
def aime(tmp_path_factory):
    root = tmp_path_factory.mktemp("aime_2024")
    _write(
        root / "data" / "train-00000-of-00001.parquet",
        pa.table(
            {
                "id": pa.array([a for a, _, _ in AIME], pa.int64()),
                "problem": [p for _, p, _ in AIME],
                "solution": ["(worked solution)"] * len(AIME),
                "answer": [a for _, _, a in AIME],
                "url": ["https://artofproblemsolving.com/wiki"] * len(AIME),
                "year": ["2024"] * len(AIME),
            }
        ),
    )
    (root / "README.md").write_text("# AIME 2024 (shape only; no configs block, as the Hub's)\n")
    return root


@pytest.fixture(scope="module")
def math500(tmp_path_factory):
    root = tmp_path_factory.mktemp("MATH-500")
    _write(
        root / "data" / "test-00000-of-00001.parquet",
        pa.table(
            {
                "problem": [p for p, _ in MATH500],
                "solution": ["(worked solution)"] * len(MATH500),
                "answer": [a for _, a in MATH500],
                "subject": ["Precalculus", "Intermediate Algebra"],
                "level": pa.array([2, 5], pa.int64()),
                "unique_id": ["test/precalculus/807.json", "test/intermediate_algebra/1994.json"],
            }
        ),
    )
    return root


def _openr1_table(problems):
    n = len(problems)
    generations = [
        [f"<think>\nreasoning {i}\n</think>\nThe answer is \\boxed{{{i}}}.", "<think>\nother\n</think>"]
        for i in range(n)
    ]
    return pa.table(
        {
            "problem": problems,
            "solution": ["(reference solution)"] * n,
            "answer": [str(i) for i in range(n)],
            "problem_type": ["Algebra"] * n,
            "question_type": ["math-word-problem"] * n,
            "source": ["olympiads"] * n,
            "uuid": [f"uuid-{i}" for i in range(n)],
            "is_reasoning_complete": pa.array([[True, False]] * n, pa.list_(pa.bool_())),
            "generations": pa.array(generations, pa.list_(pa.string())),
            "correctness_math_verify": pa.array([[True, False]] * n, pa.list_(pa.bool_())),
            "correctness_llama": pa.array([None] * n, pa.list_(pa.bool_())),
            "finish_reasons": pa.array([None] * n, pa.list_(pa.string())),
            "correctness_count": pa.array([1] * n, pa.int64()),
            "messages": pa.array(
                [
                    [{"content": p, "role": "user"}, {"content": g[0], "role": "assistant"}]
                    for p, g in zip(problems, generations)
                ],
                pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())])),
            ),
        }
    )


@pytest.fixture(scope="module")
def openr1(tmp_path_factory):
    root = tmp_path_factory.mktemp("OpenR1-Math-220k")
    for config, folder in (("default", "data"), ("extended", "extended"), ("all", "all")):
        _write(root / folder / "train-00000-of-00001.parquet", _openr1_table(OPENR1[config]))
    (root / "README.md").write_text(OPENR1_README)
    return root


@pytest.fixture(scope="module")
def two_splits(tmp_path_factory):
    root = tmp_path_factory.mktemp("two_splits")
    for split in ("train", "test"):
        _write(
            root / "data" / f"{split}-00000-of-00001.parquet",
            pa.table({"problem": [f"a {split} problem"], "answer": ["1"]}),
        )
    return root


def test_eval_data_of_an_aime_shaped_folder_is_its_only_split_train(aime):
    from reasonkit.distill.eval.run import EvalConfig

    cfg = EvalConfig(model="unused", data=str(aime), out="unused")  # no split named: as the recipes write it
    prompts = read_prompts(cfg.data, ColumnMap(), split=cfg.split)
    assert prompts.column("problem").to_pylist() == [p for _, p, _ in AIME]
    assert prompts.column("id").to_pylist() == ["60", "61", "62"]  # the Hub's int64 ids, as text
    assert prompts.column("answer").to_pylist() == ["204", "113", "371"]
    assert read_table(f"{aime}:train")[0].equals(read_table(str(aime))[0])


def test_math500_shaped_folder_is_its_only_split_test(math500):
    table, name = read_table(str(math500))
    assert table.column("problem").to_pylist() == [p for p, _ in MATH500] and name.endswith(":default:test") is False
    assert table.schema.field("level").type == pa.int64()
    prompts = read_prompts(f"{math500}:test")
    assert prompts.column("answer").to_pylist() == [a for _, a in MATH500]


def test_a_folder_laid_out_as_math500_on_the_hub_reads_too(tmp_path):
    """MATH-500's own repository holds one top-level test.jsonl: named for its split."""
    (tmp_path / "test.jsonl").write_text(
        "".join(json.dumps({"problem": p, "answer": a, "level": 2}) + "\n" for p, a in MATH500)
    )
    assert read_table(str(tmp_path))[0].column("answer").to_pylist() == [a for _, a in MATH500]
    with pytest.raises(UserError, match="no split 'train'; it has: test"):
        read_table(f"{tmp_path}:train")


def test_decontamination_against_both_benchmark_folders(aime, math500):
    from reasonkit.filters.decontam import contaminated_by, load_eval_sets

    sets = load_eval_sets([f"aime24={aime}", str(math500)])
    assert [s.name for s in sets] == ["aime24", math500.name] and [s.problems for s in sets] == [3, 2]
    assert contaminated_by("Note: " + AIME[1][1], sets) == "aime24"
    assert contaminated_by(MATH500[0][0].upper(), sets) == math500.name
    assert contaminated_by("What is 12 * 13?", sets) is None


def test_distill_filter_decontaminates_against_hub_shaped_folders(aime, math500, tmp_path):
    from reasonkit.filters.command import filter as filter_command

    from .helpers.synthetic import trace, write_traces

    leaked = trace("leak", 0, problem=AIME[0][1], response=r"\boxed{204}", answer="204")
    traces = write_traces(tmp_path / "traces", [leaked, trace("clean", 0)])
    out = tmp_path / "out"
    result = CliRunner().invoke(
        filter_command,
        [
            str(traces),
            "--out",
            str(out),
            "--verifier",
            "int",
            "--workers",
            "1",
            "--decontam",
            f"aime24={aime}",
            "--decontam",
            f"math500={math500}:test",
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert "contaminated:aime24" in json.dumps(report) and report["rows_out"] == 1


def test_generate_prompts_from_the_openr1_default_config(openr1):
    prompts = read_prompts(f"{openr1}:default:train")
    assert prompts.column("problem").to_pylist() == OPENR1["default"]
    # the reference solution (R1's trace as the last, assistant turn) is trimmed: the teacher is asked
    assert prompts.column("messages").to_pylist() == [[{"role": "user", "content": p}] for p in OPENR1["default"]]
    assert prompts.column("source").to_pylist() == ["olympiads"] * 2
    # a single suffix naming a config, and the split by field, read the same rows
    assert read_prompts(f"{openr1}:extended").column("problem").to_pylist() == OPENR1["extended"]
    assert read_prompts(f"{openr1}:all", split="train").num_rows == 2
    assert read_prompts(str(openr1)).column("problem").to_pylist() == OPENR1["default"]  # the default config


def test_generate_stage_reads_the_openr1_folder_and_fingerprints_its_split(openr1, tmp_path):
    from reasonkit.gen.run import GenerateConfig
    from reasonkit.store import fingerprint_path

    cfg = GenerateConfig(prompts=f"{openr1}:default:train", teacher="unused", out=str(tmp_path / "o"), backend="hf")
    assert read_prompts(cfg.prompts, cfg.columns, split=cfg.split).num_rows == 2
    default, extended = fingerprint_path(f"{openr1}:default:train"), fingerprint_path(f"{openr1}:extended:train")
    assert default != extended and default == fingerprint_path(str(openr1)) == fingerprint_path(
        f"{openr1}:default", "train"
    )


def test_two_splits_and_no_split_named_is_one_line_listing_them(two_splits):
    with pytest.raises(UserError) as e:
        read_table(str(two_splits))
    message = str(e.value)
    assert "no split named" in message and "train, test" in message and "\n" not in message
    with pytest.raises(UserError, match="says 'test'"):
        read_table(f"{two_splits}:train", split="test")
    assert read_table(str(two_splits), split="test")[0].column("problem").to_pylist() == ["a test problem"]


def test_an_unknown_config_lists_the_configs(openr1):
    with pytest.raises(UserError) as e:
        read_prompts(f"{openr1}:defualt:train")
    assert (
        "no config 'defualt'" in str(e.value) and "all, default, extended" in str(e.value) and "\n" not in str(e.value)
    )
    with pytest.raises(UserError, match="no split 'test'; it has: train"):
        read_prompts(f"{openr1}:default:test")


def test_hub_ids_offline_name_the_download_that_works(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError) as e:
        read_prompts("HuggingFaceH4/no_such_dataset_here:train")
    assert "HF_HUB_OFFLINE=1" in str(e.value) and "huggingface-cli download --repo-type dataset" in str(e.value)
    assert "\n" not in str(e.value)


def test_eval_on_the_aime_shaped_folder_with_no_split(teacher_dir, aime, tmp_path):
    from reasonkit.distill.eval.run import EvalConfig, run_eval

    summary = run_eval(
        EvalConfig(
            model=teacher_dir,
            data=str(aime),
            out=str(tmp_path / "eval"),
            backend="hf",
            k=1,
            limit=2,
            max_tokens=16,
            dtype="float32",
            verifier="int",
        )
    )
    assert summary["n_problems"] == 2 and summary["protocol"]["dataset_fingerprint"]
