"""`distill push` without a network: the dry-run repository loads with `datasets`, the card carries
its metadata and provenance, the token appears nowhere, and bad input is one clear error.

The stage directories come from tests/helpers/hub.py; the upload itself is in tests/hub/test_upload.py.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner

from reasonkit import __version__
from reasonkit import cli as cli_module
from reasonkit.errors import UserError
from reasonkit.hub.push import push
from reasonkit.store import StageWriter, fingerprint, fingerprint_path

from ..helpers.hub import (
    GEN_CONFIG,
    GEN_FP,
    PRIVATE_URL,
    RECIPE,
    REPORT,
    TEACHER,
    TOKEN,
    folder_files,
    traces_of,
    verdicts_of,
)


def _card_meta(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


@pytest.fixture
def distill(monkeypatch):
    """The `distill` group's `push` (the registry, stages.py, maps it to this module)."""
    return lambda *args: CliRunner().invoke(cli_module.cli, ["push", *map(str, args)])


# -- dry run ----------------------------------------------------------------------------------------


def test_dry_run_folder_loads_every_config_with_datasets(stages, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the filter recorded input_path relative to this directory
    folder = tmp_path / "preview"
    result = push(stages, "org/r1-distill-tiny", dry_run=folder, license="apache-2.0", recipe=_recipe(tmp_path))
    assert result["configs"] == {"default": 3, "rejected": 1, "sft": 3}
    assert result["url"] is None and result["commit"] is None

    files = folder_files(folder)
    assert (
        sorted(files)
        == [
            "README.md",
            "data/train-00000-of-00002.parquet",
            "data/train-00001-of-00002.parquet",
            "provenance.json",
            "rejected/train-00000-of-00001.parquet",
            "sft/train-00000-of-00001.parquet",
        ]
        == sorted(result["files"])
    )
    # The shards travel byte for byte.
    assert files["data/train-00000-of-00002.parquet"] == (stages / "part-00000.parquet").read_bytes()
    assert files["data/train-00001-of-00002.parquet"] == (stages / "part-00001.parquet").read_bytes()
    assert files["rejected/train-00000-of-00001.parquet"] == (stages / "rejected" / "part-00000.parquet").read_bytes()

    import datasets

    cache = str(tmp_path / "hf-cache")
    main = datasets.load_dataset(str(folder), split="train", cache_dir=cache)
    assert main.num_rows == 3 and main["id"] == ["p0", "p1", "p2"] and "drop_reason" in main.column_names
    assert main[0]["messages"][0]["role"] == "user"
    rejected = datasets.load_dataset(str(folder), "rejected", split="train", cache_dir=cache)
    assert rejected["drop_reason"] == ["wrong_answer"]
    sft = datasets.load_dataset(str(folder), "sft", cache_dir=cache)
    assert list(sft) == ["train"] and sft["train"].column_names == ["id", "messages", "source"]


def _recipe(tmp_path: Path) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE)
    return path


def test_card_metadata_and_provenance(stages, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "preview"
    push(stages, "org/r1-distill-tiny", dry_run=folder, license="apache-2.0", recipe=_recipe(tmp_path))
    card = (folder / "README.md").read_text()
    meta = _card_meta(card)
    assert meta["license"] == "apache-2.0"
    assert meta["task_categories"] == ["text-generation"]
    assert meta["size_categories"] == ["n<1K"]
    assert meta["language"] == ["en"]
    assert meta["configs"] == [
        {
            "config_name": "default",
            "data_files": [{"split": "train", "path": "data/train-*.parquet"}],
            "default": True,
        },
        {"config_name": "rejected", "data_files": [{"split": "train", "path": "rejected/train-*.parquet"}]},
        {"config_name": "sft", "data_files": [{"split": "train", "path": "sft/train-*.parquet"}]},
    ]
    body = card.split("---\n", 2)[2]
    # teacher and gen_config counted in the rows
    assert f"| `{TEACHER}` | `{GEN_FP}` | 3 |" in body
    # sampling parameters from the generate manifest two stages up (input_path chain)
    assert "| temperature | `0.6` |" in body and "| top_p | `0.95` |" in body and "| n | `2` |" in body
    assert "| backend_info.openai | `1.99.0` |" in body
    # the funnel, in order, with what remains
    assert (
        "| rows in | | | 8 |" in body
        and "| `verify` | `wrong_answer` | 2 | 6 |" in body
        and "| rows out | | | 5 |" in body
    )
    # decontamination: what was checked and what it found
    assert "Checked against: `evals/aime24.parquet`\n" in body and "| `aime24` | `1` |" in body  # not its column
    assert "| math_verify | `0.8.0` |" in body and "| lingua | `2.1.0` |" in body
    assert "| source | `.../" in body and "/prompts.jsonl` |" in body  # the lineage reaches the prompts file
    # no machine-specific path is published (the generate stage recorded an absolute input_path)
    published = card + (folder / "provenance.json").read_text()
    assert str(tmp_path) not in published and PRIVATE_URL not in published
    assert f"reasonkit {__version__}" in body
    assert RECIPE.strip() in body
    prov = json.loads((folder / "provenance.json").read_text())
    assert [ln["manifest"]["stage"] if ln["manifest"] else "source" for ln in prov["lineage"]] == [
        "filter",
        "generate",
        "source",
    ]
    assert prov["configs"]["rejected"]["files"] == ["rejected/train-00000-of-00001.parquet"]


def test_the_pushed_card_is_the_stage_card_with_provenance(stages, tmp_path, monkeypatch):
    """Issue 37: one card, not two. The stage directory's own card (.huggingface.yaml, written at each commit)
    is not uploaded; the repository's README.md has its configs, by the same names, and its table section, then
    provenance."""
    monkeypatch.chdir(tmp_path)
    local = yaml.safe_load((stages / ".huggingface.yaml").read_text())
    push(stages, "org/x", dry_run=tmp_path / "preview")
    files = folder_files(tmp_path / "preview")
    assert [f for f in files if f.endswith((".md", ".yaml"))] == ["README.md"]
    card = files["README.md"].decode()
    assert [c["config_name"] for c in _card_meta(card)["configs"]] == [c["config_name"] for c in local["configs"]]
    body = card.split("---\n", 2)[2]
    assert "| config | table | rows | shards | completion tokens | complete |" in body
    assert '`load_dataset("org/x", split="train")`' in body and '`load_dataset("org/x", "sft", split="train")`' in body
    assert body.index("## Configs") < body.index("## Provenance") and "reasonkit stage card" not in body


def test_unreachable_input_is_said_not_guessed(stages, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "traces").rename(tmp_path / "archived-traces")  # gone from where it was recorded
    push(stages, "org/x", dry_run=tmp_path / "preview")
    card = (tmp_path / "preview" / "README.md").read_text()
    assert "input `runs/traces` is not reachable from here" in card
    assert "No `generate` manifest is reachable" in card
    assert f"| `{TEACHER}` |" in card  # still counted from the rows themselves


def test_changed_input_is_not_trusted(stages, tmp_path, monkeypatch):
    from reasonkit.hub.provenance import lineage
    from reasonkit.store import load_manifest

    monkeypatch.chdir(tmp_path)
    with StageWriter(
        tmp_path / "runs" / "traces",
        stage="generate",
        kind="traces",
        config=GEN_CONFIG,
        keys=("id", "sample"),
        input_fingerprint=fingerprint_path(tmp_path / "prompts.jsonl"),
    ) as w:
        w.commit(traces_of(["p9"]))  # the traces grew after the filter read them
        w.finish()
    chain = lineage(stages, load_manifest(stages))
    assert len(chain) == 1
    assert chain[0].notes == [
        "input `runs/traces` has changed since this stage read it; provenance stops at this stage"
    ]


def test_hub_dataset_source(tmp_path):
    from reasonkit.hub.provenance import lineage
    from reasonkit.store import load_manifest

    with StageWriter(
        tmp_path / "gen",
        stage="generate",
        kind="traces",
        config=GEN_CONFIG,
        keys=("id", "sample"),
        input_fingerprint=fingerprint_path("AI-MO/aimo-validation-aime"),
    ) as w:
        w.commit(traces_of(["p0"]))
        w.finish(run_config={"prompts": "AI-MO/aimo-validation-aime"})
    chain = lineage(tmp_path / "gen", load_manifest(tmp_path / "gen"))
    assert [ln.source for ln in chain] == [None, "AI-MO/aimo-validation-aime"] and chain[0].notes == []


def test_empty_and_untyped_substages_are_listed_not_published(stages, tmp_path):
    with StageWriter(stages / "extra", stage="filter", kind="sft", config={}, keys=("id",)) as w:
        w.finish()
    # a judge-style work log: no table kind, rows of its own shape, never finished
    StageWriter(stages / "record", stage="judge-record", kind=None, config={}, keys=("id",)).commit(
        pa.table({"id": ["a"]})
    )
    result = push(stages, "org/x", dry_run=tmp_path / "preview")
    assert list(result["configs"]) == ["default", "rejected", "sft"]
    card = (tmp_path / "preview" / "README.md").read_text()
    assert "Not published: `extra` (empty), `record` (a work record without a table kind)." in card
    assert not (tmp_path / "preview" / "record").exists()


def test_token_appears_nowhere(stages, tmp_path, monkeypatch, distill):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    folder = tmp_path / "preview"
    result = distill(stages, "--repo", "org/x", "--dry-run", folder)
    assert result.exit_code == 0, result.output
    assert f"dry run: wrote 6 files to {folder}" in result.output and "nothing uploaded" in result.output
    assert TOKEN not in result.output
    for name, data in folder_files(folder).items():
        assert TOKEN.encode() not in data, name
    for manifest in stages.rglob("_manifest.json"):
        assert TOKEN not in manifest.read_text()


def test_token_in_generated_card_is_refused(stages, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    leaky = tmp_path / "leaky.yaml"
    leaky.write_text(f"generate:\n  api_key: {TOKEN}\n")
    with pytest.raises(UserError, match="token appears in the generated README.md") as e:
        push(stages, "org/x", dry_run=tmp_path / "preview", recipe=leaky)
    assert TOKEN not in str(e.value)
    assert not (tmp_path / "preview").exists()


def test_help_and_light_import(distill):
    result = distill("--help")
    assert result.exit_code == 0 and "Usage:" in result.output and "--dry-run FOLDER" in result.output
    probe = (
        "import sys, reasonkit.hub.push; print([m for m in ('huggingface_hub', 'datasets', 'pyarrow', 'yaml') "
        "if m in sys.modules])"
    )
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "[]"


# -- bad input: one error, exit 2, nothing written ------------------------------------------------


@pytest.mark.parametrize("repo", ["noslash", "a/b/c", "org/na me", "org/x--y", "org/x.git", "-org/x", "org/", ""])
def test_bad_repo_id(stages, tmp_path, distill, repo):
    result = distill(stages, "--repo", repo, "--dry-run", tmp_path / "preview")
    assert result.exit_code == 2 and result.output.startswith("error: --repo"), result.output
    assert not (tmp_path / "preview").exists()


def test_incomplete_directory(tmp_path, distill):
    w = StageWriter(tmp_path / "partial", stage="generate", kind="traces", config=GEN_CONFIG, keys=("id", "sample"))
    w.commit(traces_of(["p0"]))  # never finished
    result = distill(tmp_path / "partial", "--repo", "org/x", "--dry-run", tmp_path / "preview")
    assert result.exit_code == 2 and "is incomplete (1 rows committed)" in result.output
    assert not (tmp_path / "preview").exists()


def test_incomplete_substage(stages, tmp_path, distill):
    StageWriter(stages / "pairs", stage="pairs", kind="prefs", config={}, keys=("id",))  # started, not finished
    result = distill(stages, "--repo", "org/x", "--dry-run", tmp_path / "preview")
    assert result.exit_code == 2 and "pairs: stage 'pairs' is incomplete" in result.output


def test_not_a_stage_directory(tmp_path, distill):
    (tmp_path / "plain").mkdir()
    result = distill(tmp_path / "plain", "--repo", "org/x", "--dry-run", tmp_path / "preview")
    assert result.exit_code == 2 and "not a stage directory (no _manifest.json)" in result.output
    result = distill(tmp_path / "nowhere", "--repo", "org/x", "--dry-run", tmp_path / "preview")
    assert result.exit_code == 2 and "no such directory" in result.output


def test_missing_shard(stages, tmp_path, distill):
    (stages / "part-00001.parquet").unlink()
    result = distill(stages, "--repo", "org/x", "--dry-run", tmp_path / "preview")
    assert result.exit_code == 2 and "part-00001.parquet: listed in" in result.output


def test_non_empty_dry_run_folder(stages, tmp_path, distill):
    (tmp_path / "preview").mkdir()
    (tmp_path / "preview" / "keep.txt").write_text("mine")
    result = distill(stages, "--repo", "org/x", "--dry-run", tmp_path / "preview")
    assert result.exit_code == 2 and "not an empty folder" in result.output
    assert folder_files(tmp_path / "preview") == {"keep.txt": b"mine"}


def test_missing_token(stages, tmp_path, monkeypatch, distill):
    import huggingface_hub.constants

    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    result = distill(stages, "--repo", "org/x")
    assert result.exit_code == 2 and result.output.startswith("error: no Hugging Face token"), result.output


# -- what a public card may say about a local run ---------------------------------------------------


def _recipe_run(root: Path, teacher: str, identity: str) -> Path:
    """run/verified <- run/traces as a recipe records them: absolute paths, the filter's inputs as a list."""
    config = {**GEN_CONFIG, "teacher": teacher, "teacher_identity": identity}
    gen, out = root / "run" / "traces", root / "run" / "verified"
    root.mkdir(parents=True, exist_ok=True)
    (root / "p.jsonl").write_text('{"id": "p0", "problem": "1+1"}\n')
    with StageWriter(
        gen,
        stage="generate",
        kind="traces",
        config=config,
        keys=("id", "sample"),
        input_fingerprint=fingerprint_path(root / "p.jsonl"),
        input_path=str(root / "p.jsonl"),
    ) as w:
        w.commit(traces_of(["p0"]).set_column(9, "teacher", pa.array([teacher])))
        w.finish()
    with StageWriter(
        out,
        stage="filter",
        kind="verdicts",
        config={"decontam": [str(root / "evals.jsonl")]},
        keys=("id", "sample"),
        input_fingerprint=fingerprint([fingerprint_path(gen)]),
        input_path=[str(gen)],
    ) as w:
        w.commit(verdicts_of(["p0"], keep=True).set_column(9, "teacher", pa.array([teacher])))
        w.finish()
    (out / "report.json").write_text(json.dumps({**REPORT, "input": str(gen)}))
    return out


def test_a_local_teacher_is_named_by_its_directory_and_content_not_its_path(tmp_path):
    teacher = str(tmp_path / "models" / "my-teacher")
    out = _recipe_run(tmp_path, teacher, "sha256:" + "0123456789abcdef" * 4)
    push(out, "org/x", dry_run=tmp_path / "preview")
    card = (tmp_path / "preview" / "README.md").read_text()
    assert "| teacher | `my-teacher@sha256:0123456789abcdef` |" in card  # the sampling parameters
    assert "| `my-teacher@sha256:0123456789abcdef` |" in card.split("### Teachers")[1]  # counted in the rows
    assert '"input": ".../run/traces"' in card  # report.json, folded in the card
    assert f"Checked against: `.../{tmp_path.name}/evals.jsonl`" in card  # the last two parts of a path
    for name in ("README.md", "provenance.json"):
        assert str(tmp_path) not in (tmp_path / "preview" / name).read_text(), name


def test_a_moved_run_is_found_beside_the_stage_and_a_lookalike_is_not_trusted(tmp_path):
    out = _recipe_run(tmp_path / "old", "/srv/teacher", "sha256:" + "ab" * 32)
    (tmp_path / "old" / "run").rename(tmp_path / "run")  # the recorded absolute paths now name nothing
    push(tmp_path / "run" / "verified", "org/x", dry_run=tmp_path / "moved")
    card = (tmp_path / "moved" / "README.md").read_text()
    assert "| temperature | `0.6` |" in card and "not reachable" not in card
    assert out.name == "verified"

    # Alone, beside a traces stage that is not the one it read: said, not followed.
    (tmp_path / "alone").mkdir()
    (tmp_path / "run" / "verified").rename(tmp_path / "alone" / "verified")
    shutil.rmtree(tmp_path / "run")  # the traces it read are gone
    with StageWriter(
        tmp_path / "alone" / "traces", stage="generate", kind="traces", config=GEN_CONFIG, keys=("id", "sample")
    ) as w:
        w.commit(traces_of(["other"]))
        w.finish()
    result = push(tmp_path / "alone" / "verified", "org/x", dry_run=tmp_path / "alone-card")
    card = (tmp_path / "alone-card" / "README.md").read_text()
    note = (
        "input `.../run/traces` is not reachable from here (moved or deleted since this stage read it); "
        "provenance stops at this stage"
    )
    assert result["notes"] == [note] and f"- {note}" in card
    assert "No `generate` manifest is reachable" in card
