"""Every stage directory is a dataset (issue 37): the card store.py writes at each commit (stage_card.py)
makes `datasets.load_dataset(DIR)` read exactly the directory's main table and `load_dataset(DIR, NAME)`
each sub-table, with the real `datasets`, polars, pandas and TRL's own CLIs; metadata is never rows.

Before the card, `load_dataset` guessed from file extensions: a filter's directory gave its kept rows,
`rejected/` and `sft/` merged into one split, and a directory with as many JSON files as shards (a sub-stage
of one shard, a pairs directory) was read as JSON. The stages here are the real filter and pairs on literal
traces, and StageWriter (the writer every stage commits through) in each other stage's layout; one slow test
runs the real `distill eval`.
"""

import glob
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from reasonkit.distill.eval.run import CARD_TABLES
from reasonkit.distill.rl.rollouts import open_rollouts
from reasonkit.errors import UserError
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.judges.config import PairsConfig
from reasonkit.judges.pairs import run_pairs
from reasonkit.readers import read_table
from reasonkit.schema import MESSAGES, TOOL_MESSAGES, validate
from reasonkit.stage_card import CARD, is_ours
from reasonkit.store import MANIFEST, StageWriter, load_manifest, read_stage, write_card

from .helpers.synthetic import synthetic_rows, trace, traces_table, write_traces

TEACHER = Path(__file__).resolve().parent.parent / "recipes" / "assets" / "teacher"
TRL = str(Path(sys.executable).with_name("trl"))


# -- the stage directories ---------------------------------------------------------------------------


def _trajectories(n: int) -> pa.Table:
    """Tool-use rows in the trajectories table's shape (a search call, its observation, the answer)."""
    turn = {"tool_calls": None, "name": None}
    call = {
        **turn,
        "role": "assistant",
        "content": "",
        "tool_calls": [{"name": "search", "arguments": '{"query": "x"}'}],
    }
    messages = [
        {**turn, "role": "user", "content": "When?"},
        call,
        {**turn, "role": "tool", "content": "1969.", "name": "search"},
        {**turn, "role": "assistant", "content": r"\boxed{1969}"},
    ]
    scalars = {
        "id": [f"q{i}" for i in range(n)],
        "sample": [0] * n,
        "response": [r"\boxed{1969}"] * n,
        "turns": [2] * n,
        "tool_calls": [1] * n,
        "tool_errors": [0] * n,
        "finish_reason": ["stop"] * n,
        "prompt_tokens": [9] * n,
        "completion_tokens": [5] * n,
        "teacher": ["t"] * n,
        "gen_config": ["g"] * n,
    }
    table = pa.table(scalars).append_column("messages", pa.array([messages] * n, TOOL_MESSAGES))
    return validate(table, "trajectories")


def _writer(path: Path, stage: str, kind: str | None, keys=("id", "sample")) -> StageWriter:
    return StageWriter(path, stage=stage, kind=kind, config={"literal": True}, keys=keys)


def _label_steps(out: Path) -> None:
    """label-steps' layout: the steps table, and Step-DPO pairs in step_dpo/ (judges/steps/run.py)."""
    steps, pairs = _writer(out, "label-steps", "steps"), _writer(out / "step_dpo", "label-steps", "prefs_text")
    steps.commit(
        pa.table(
            {
                "id": ["s0", "s1"],
                "prompt": ["1+1?", "2+2?"],
                "completions": [["a", "b"], ["c"]],
                "labels": [[True, False], [True]],
                "soft": pa.array([[1.0, 0.0], [1.0]], pa.list_(pa.float32())),
                "sample": pa.array([0, 0], pa.int32()),
            }
        )
    )
    pairs.commit(
        pa.table(
            {
                "id": ["s0"],
                "prompt": ["1+1? Step 1: a"],
                "chosen": ["b-fixed"],
                "rejected": ["b"],
                "strategy": ["step-dpo"],
                "sample": pa.array([0], pa.int32()),
            }
        )
    )
    pairs.finish()
    steps.finish()


def _scores(out: Path) -> None:
    w = _writer(out, "score", "scores")
    for ids in (["a", "b", "c"], ["d", "e"]):
        t = traces_table([trace(i) for i in ids])
        w.commit(t.append_column("reward", pa.array([0.5] * len(ids), pa.float32())))
    w.finish()


def _rollouts(out: Path) -> None:
    """A GRPO run's rollouts through the writer train.py opens (distill/rl/rollouts.py), two commits."""
    cfg = SimpleNamespace(rewards={"accuracy": 1.0}, data="p.parquet", tools=None)
    log = open_rollouts(cfg, out, None, {"fingerprint": "f", "data_fingerprint": "d"}, say=print)
    for step in (1, 2):
        log.add(
            [
                {**trace(f"p{i}"), "step": step, "reward": 1.0, "reward_accuracy": 1.0, "advantage": 0.0}
                for i in range(3)
            ]
        )
        log.commit()
    log.finish()


def _eval_layout(out: Path) -> None:
    """An eval directory as run_eval lays it out (the slow test below runs the real one)."""
    out.mkdir()
    write_card(out, layout=CARD_TABLES, stage="eval")
    gen = _writer(out / "generations", "generate", "traces")
    gen.commit(traces_table([trace("e0", s) for s in range(2)] + [trace("e1", s) for s in range(2)]))
    gen.finish()
    samples = _writer(out / "samples", "eval", "eval_samples")
    samples.commit(
        pa.table(
            {
                "id": ["e0", "e0", "e1", "e1"],
                "sample": pa.array([0, 1, 0, 1], pa.int32()),
                "pred": ["4", "4", "5", None],
                "correct": [True, True, False, None],
                "completion_tokens": pa.array([3, 3, 4, 4], pa.int32()),
            }
        )
    )
    samples.finish()
    pq.write_table(pa.table({"id": ["e0", "e1"], "n": [2, 2], "correct": [2, 0]}), out / "problems.parquet")
    (out / "summary.json").write_text('{"pass@1": 0.5}')
    write_card(out)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """One run directory of every table kind: traces (5 shards) -> filter (verdicts, rejected/, sft/) -> pairs
    (prefs, 1 shard, report.json), trajectories, steps + step_dpo/, scores (2 shards), a GRPO run's rollouts/,
    an eval's problems.parquet + samples/ + generations/."""
    root = tmp_path_factory.mktemp("run")
    write_traces(root / "traces", synthetic_rows(6, samples=4, seed=1, wrong=0.4, reasoning_words=8), shard_rows=5)
    run_filter(
        FilterConfig(traces=str(root / "traces"), out=str(root / "verified"), verifier="int", workers=1, batch_rows=4)
    )
    run_pairs(PairsConfig(verdicts=str(root / "verified"), out=str(root / "pairs")))
    w = _writer(root / "trajectories", "generate", "trajectories")
    w.commit(_trajectories(3))
    w.finish()
    _label_steps(root / "steps")
    _scores(root / "scores")
    _rollouts(root / "grpo")
    _eval_layout(root / "eval")
    return root


#: (directory, config or None, where reasonkit reads the same table)
CASES = [
    ("traces", None, "traces"),
    ("verified", None, "verified"),
    ("verified", "rejected", "verified/rejected"),
    ("verified", "sft", "verified/sft"),
    ("verified/sft", None, "verified/sft"),
    ("verified/rejected", None, "verified/rejected"),
    ("pairs", None, "pairs"),
    ("trajectories", None, "trajectories"),
    ("steps", None, "steps"),
    ("steps", "step_dpo", "steps/step_dpo"),
    ("scores", None, "scores"),
    ("grpo", None, "grpo/rollouts"),
    ("grpo", "rollouts", "grpo/rollouts"),
    ("grpo/rollouts", None, "grpo/rollouts"),
    ("eval", None, "eval/problems.parquet"),
    ("eval", "problems", "eval/problems.parquet"),
    ("eval", "samples", "eval/samples"),
    ("eval", "generations", "eval/generations"),
]


def _expected(run: Path, source: str) -> tuple[pa.Table, int]:
    """What reasonkit reads there, and the row count its manifest (or the file's footer) records."""
    if source.endswith(".parquet"):
        return pq.read_table(run / source), pq.ParquetFile(run / source).metadata.num_rows
    return read_stage(run / source), load_manifest(run / source)["rows"]


def card_configs(directory: Path) -> dict[str, dict]:
    return {c["config_name"]: c for c in yaml.safe_load((directory / CARD).read_text())["configs"]}


def _only_shards(directory: Path) -> bool:
    """Whether pyarrow's folder discovery sees only shards there (it skips names starting with . and _)."""
    return all(p.suffix == ".parquet" for p in directory.iterdir() if not p.name.startswith((".", "_")))


def test_folders_of_shards_alone_are_the_stages_without_records(run):
    """Which directories `pd.read_parquet(DIR)` reads whole: those holding only shards and hidden files. A
    filter's (sub-folders, report.json), a pairs stage's (report.json) and a step labeller's (step_dpo/) are read
    through the card's globs."""
    assert [d for d, n, s in CASES if n is None and s == d and _only_shards(run / d)] == [
        d for d, n, s in CASES if n is None and s == d and d not in ("verified", "pairs", "steps")
    ]


def _keys(rows) -> list[tuple]:
    return list(zip(*(list(rows[c]) for c in ("id", "sample") if c in rows.columns)))


@pytest.mark.parametrize("directory,name,source", CASES, ids=[f"{d}:{n or 'default'}" for d, n, _ in CASES])
def test_load_dataset_polars_and_pandas_read_exactly_the_table(run, directory, name, source, tmp_path):
    import datasets
    import pandas as pd
    import polars as pl

    expected, recorded = _expected(run, source)
    assert expected.num_rows == recorded > 0
    ds = datasets.load_dataset(str(run / directory), name, split="train", cache_dir=str(tmp_path))
    assert ds.num_rows == recorded and ds.column_names == expected.column_names
    assert ds["id"] == expected.column("id").to_pylist()  # the same rows, in the manifest's order
    if "sample" in expected.column_names:
        assert ds["sample"] == expected.column("sample").to_pylist()
    # polars and pandas, on the data files the card names for that config
    configs = card_configs(run / directory)
    files = configs[name or next(n for n, c in configs.items() if c.get("default"))]["data_files"][0]["path"]
    for frame in (
        pl.read_parquet(str(run / directory / files)).to_pandas(),
        pd.read_parquet(sorted(glob.glob(str(run / directory / files)))),
    ):
        assert list(frame.columns) == expected.column_names and len(frame) == recorded
        assert list(frame["id"]) == expected.column("id").to_pylist()
    if name is None and source == directory and _only_shards(run / directory):
        # the line everyone types on a folder of shards: the card must not break it (a README.md did)
        for frame in (pd.read_parquet(run / directory), pq.read_table(run / directory).to_pandas()):
            assert len(frame) == recorded and list(frame["id"]) == expected.column("id").to_pylist()


@pytest.mark.parametrize(
    "directory,names",
    [
        ("verified", ["default", "rejected", "sft"]),
        ("pairs", ["default"]),
        ("steps", ["default", "step_dpo"]),
        ("grpo", ["rollouts"]),
        ("eval", ["problems", "samples", "generations"]),
        ("verified/sft", ["default"]),
    ],
)
def test_each_directory_offers_its_tables_and_no_metadata(run, directory, names):
    import datasets

    assert datasets.get_dataset_config_names(str(run / directory)) == names
    assert datasets.get_dataset_default_config_name(str(run / directory)) == names[0]
    for config in card_configs(run / directory).values():
        assert config["data_files"][0]["path"].endswith(".parquet")  # never _manifest.json, report.json, summary.json


def test_the_main_table_alone_where_load_dataset_merged_three(run, tmp_path):
    """The issue's two failures: verified read as kept + rejected + sft, pairs read with the JSON builder."""
    import datasets

    assert (run / "pairs" / "report.json").is_file() and (run / "verified" / "report.json").is_file()
    verified = datasets.load_dataset(str(run / "verified"), cache_dir=str(tmp_path))
    assert list(verified) == ["train"] and verified["train"].num_rows == load_manifest(run / "verified")["rows"]
    assert "drop_reason" in verified["train"].column_names and all(verified["train"]["keep"])
    pairs = datasets.load_dataset(str(run / "pairs"), split="train", cache_dir=str(tmp_path))
    assert pairs.num_rows == load_manifest(run / "pairs")["rows"]
    assert pairs.column_names[:4] == ["id", "prompt", "chosen", "rejected"]


# -- directories from before the card ------------------------------------------------------------------


def _without_cards(run: Path, tmp_path: Path) -> Path:
    old = tmp_path / "old"
    shutil.copytree(run, old)
    for card in old.rglob(CARD):
        card.unlink()
    return old


def test_a_directory_from_before_the_card_is_read_by_the_stages(run, tmp_path):
    old = _without_cards(run, tmp_path)
    for stage_dir in (
        "traces",
        "verified",
        "verified/sft",
        "pairs",
        "steps",
        "scores",
        "grpo/rollouts",
        "eval/samples",
    ):
        assert read_table(old / stage_dir)[0].equals(read_stage(run / stage_dir)), stage_dir
    # the next stages run on it as they did, and write their own cards
    run_filter(FilterConfig(traces=str(old / "traces"), out=str(tmp_path / "v2"), verifier="int", workers=1))
    assert read_stage(tmp_path / "v2").equals(read_stage(run / "verified"))
    run_pairs(PairsConfig(verdicts=str(old / "verified"), out=str(tmp_path / "p2")))
    assert read_stage(tmp_path / "p2").equals(read_stage(run / "pairs"))
    assert (tmp_path / "v2" / CARD).is_file() and (tmp_path / "p2" / CARD).is_file()
    assert not (old / "verified" / CARD).exists()  # reading writes nothing


def test_a_card_changes_no_reasonkit_read(run, tmp_path):
    """With the card there, reasonkit still reads a stage directory by its manifest (never through datasets)."""
    table, name = read_table(run / "verified")
    assert name == str(run / "verified") and table.equals(read_stage(run / "verified"))
    _writer(tmp_path / "unfinished", "generate", "traces").commit(traces_table([trace("a")]))
    assert (tmp_path / "unfinished" / CARD).is_file()
    with pytest.raises(UserError, match="incomplete"):
        read_table(tmp_path / "unfinished")


# -- the card follows every commit ---------------------------------------------------------------------


_LOADS = itertools.count()


def _load(directory: Path, tmp_path: Path, name: str | None = None):
    """`load_dataset(DIR[, name], split="train")`, each call with a cache of its own (the card changes between)."""
    import datasets

    return datasets.load_dataset(str(directory), name, split="train", cache_dir=str(tmp_path / f"hf{next(_LOADS)}"))


def test_an_incomplete_directory_says_so_and_a_resume_completes_its_card(tmp_path):
    rows = [trace(f"p{i}") for i in range(6)]
    out = write_traces(tmp_path / "traces", rows[:4], shard_rows=2, complete=False)
    card = (out / CARD).read_text()
    assert "**Incomplete**" in card and "`default` has 4 rows so far" in card
    assert _load(out, tmp_path).num_rows == 4  # what is committed; reasonkit's readers refuse it
    w = _writer(out, "generate", "traces")  # the rerun: same config, resumes
    assert w.done_keys() == {(f"p{i}", 0) for i in range(4)}
    w.commit(traces_table(rows[4:]))
    w.finish()
    card = (out / CARD).read_text()
    assert "Incomplete" not in card and "| `default` | traces | 6 | 3 |" in card
    assert _load(out, tmp_path)["id"] == [f"p{i}" for i in range(6)]


def test_an_adopted_shard_and_an_overwrite_are_in_the_card(tmp_path):
    out = write_traces(tmp_path / "traces", [trace("a"), trace("b")], shard_rows=1)
    shutil.copy(out / "part-00001.parquet", tmp_path / "spare.parquet")
    pq.write_table(traces_table([trace("c")]), out / "part-00002.parquet")  # renamed in, manifest update lost
    _writer(out, "generate", "traces")  # reopening adopts it
    assert "| `default` | traces | 3 | 3 |" in (out / CARD).read_text() and _load(out, tmp_path).num_rows == 3
    StageWriter(
        out, stage="generate", kind="traces", config={"other": 1}, keys=("id", "sample"), overwrite=True
    ).finish()
    assert "| `default` | traces | 0 | 0 |" in (out / CARD).read_text()


def test_a_sub_stage_commit_updates_its_parents_card(run, tmp_path):
    verified = tmp_path / "verified"
    shutil.copytree(run / "verified", verified)
    before = load_manifest(verified / "sft")["rows"]
    w = StageWriter(
        verified / "sft",
        stage="filter",
        kind="sft",
        config=load_manifest(verified / "sft")["config"],
        keys=("id", "sample"),
        input_fingerprint=load_manifest(verified / "sft")["input_fingerprint"],
    )
    w.commit(
        pa.table(
            {
                "id": ["new"],
                "messages": pa.array([[{"role": "user", "content": "q"}]], MESSAGES),
                "source": ["s"],
                "sample": pa.array([0], pa.int32()),
            }
        )
    )
    parent = (verified / CARD).read_text()
    assert f"| `sft` | sft | {before + 1:,} |" in parent and "`sft` has" in parent  # and no longer complete
    assert _load(verified, tmp_path, "sft").num_rows == before + 1


def test_a_grpo_resume_drops_retrained_steps_from_the_card(run, tmp_path):
    grpo = tmp_path / "grpo"
    shutil.copytree(run / "grpo", grpo)
    assert _load(grpo, tmp_path).num_rows == 6
    cfg = SimpleNamespace(rewards={"accuracy": 1.0}, data="p.parquet", tools=None)
    open_rollouts(cfg, grpo, Path("checkpoint-1"), {"fingerprint": "f", "data_fingerprint": "d"}, say=print)
    assert "| `rollouts` (default) | traces | 3 | 1 |" in (grpo / CARD).read_text()
    assert _load(grpo, tmp_path)["step"] == [1, 1, 1]


def test_an_eval_directory_before_its_problems_says_so(tmp_path):
    import datasets

    out = tmp_path / "eval"
    out.mkdir()
    write_card(out, layout=CARD_TABLES, stage="eval")
    card = (out / CARD).read_text()
    assert "**Incomplete**" in card and "`problems` not written yet" in card
    with pytest.raises(FileNotFoundError, match="problems.parquet"):
        datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "hf"))


def test_a_card_or_readme_not_written_by_reasonkit_is_left_alone(tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / CARD).write_text("# my notes\n")
    write_traces(tmp_path / "traces", [trace("a")])
    assert (tmp_path / "traces" / CARD).read_text() == "# my notes\n"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "README.md").write_text("# my notes\n")
    write_traces(tmp_path / "mine", [trace("a")])
    assert (tmp_path / "mine" / "README.md").read_text() == "# my notes\n" and is_ours(tmp_path / "mine")


def test_a_damaged_parent_gets_no_card(tmp_path):
    out = write_traces(tmp_path / "traces", [trace("a")])
    (out / CARD).unlink()
    (out / MANIFEST).write_text("{not json")
    write_card(out)
    assert not (out / CARD).exists()


# -- the real eval, and TRL's own CLIs on the directories (slow) ----------------------------------------


@pytest.mark.slow
def test_distill_eval_writes_its_directory_card(tmp_path):
    from reasonkit.distill.eval.run import EvalConfig, run_eval
    from reasonkit.recipes.tasks.math import write_prompts

    write_prompts(tmp_path / "test.parquet", 3, seed=3, variant="aime", split="test")
    out = tmp_path / "eval"
    run_eval(
        EvalConfig(
            model=str(TEACHER),
            data=str(tmp_path / "test.parquet"),
            out=str(out),
            k=2,
            max_tokens=96,
            dtype="float32",
            verifier="int",
            backend="hf",
        )
    )
    assert "Incomplete" not in (out / CARD).read_text()
    problems = _load(out, tmp_path)
    assert problems["id"] == pq.read_table(out / "problems.parquet").column("id").to_pylist()
    assert problems.num_rows == 3
    for name in ("samples", "generations"):
        assert _load(out, tmp_path, name)["id"] == read_stage(out / name).column("id").to_pylist()


def trl(command: str, dataset: Path, tmp_path: Path, *extra: str) -> None:
    """`trl COMMAND --dataset_name DIR` for 2 steps on the embedded teacher (a 1.1M-parameter Llama), CPU, fp32."""
    args = [
        TRL,
        command,
        "--model_name_or_path",
        str(TEACHER),
        "--dataset_name",
        str(dataset),
        "--max_steps",
        "2",
        "--use_cpu",
        "--bf16",
        "false",
        "--report_to",
        "none",
        "--save_strategy",
        "no",
        "--per_device_train_batch_size",
        "2",
        "--output_dir",
        str(tmp_path / "out"),
        *extra,
    ]
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Training completed" in done.stdout + done.stderr


@pytest.mark.slow
def test_trl_sft_trains_on_a_filter_directorys_sft_config(run, tmp_path):
    trl("sft", run / "verified", tmp_path, "--dataset_config", "sft", "--max_length", "128")


@pytest.mark.slow
def test_trl_dpo_trains_on_a_pairs_directory(run, tmp_path):
    trl("dpo", run / "pairs", tmp_path, "--max_length", "128")


@pytest.mark.slow
def test_trl_grpo_trains_on_a_pairs_directorys_prompts(run, tmp_path):
    """GRPO takes a `prompt` column: the prefs table's (conversational, as TRL's think_format_reward reads it)."""
    trl(
        "grpo",
        run / "pairs",
        tmp_path,
        "--reward_funcs",
        "think_format_reward",
        "--num_generations",
        "2",
        "--max_completion_length",
        "16",
    )
