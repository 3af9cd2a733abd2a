"""The Hub card of directories `distill quickstart` really made (issue 14 item 9): the filter's funnel
with rows in, rows out and what remains, as its report.json says; the teacher's sampling parameters
reached through the recipe's `input_path` chain; no local absolute path anywhere; and a card, not a
traceback, when the stages have moved.

The stages are those of the session's one full-size quickstart run (tests/conftest.py, `quickstart`).
"""

import contextlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import reasonkit

# the session's full quickstart (~9 minutes): outside the fast lane
pytestmark = pytest.mark.slow

DISTILL = str(Path(sys.executable).parent / "distill")
# An absolute path in text: "/" not inside a word, a URL or ".../" (the card's elision), then a name.
ABSOLUTE = re.compile(r"(?<![\w.:/<~-])/[\w.-]+")


@pytest.fixture(scope="module")
def quickstart_run(quickstart) -> Path:
    """OUT of the session's full `distill quickstart` (tests/conftest.py)."""
    return quickstart.out


def push(stage: Path, folder: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [DISTILL, "push", str(stage), "--repo", "me/x", "--dry-run", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def table_under(card: str, heading: str) -> list[dict[str, str]]:
    """The first markdown table after ``heading``, as dicts by column name (backticks stripped)."""
    assert heading in card, f"no {heading!r} in the card"
    lines = card.split(heading, 1)[1].splitlines()
    rows = [line for line in lines[lines.index(next(ln for ln in lines if ln.startswith("|"))) :]]
    rows = rows[: next((i for i, ln in enumerate(rows) if not ln.startswith("|")), len(rows))]
    split = [[c.strip().strip("`") for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]
    return [dict(zip(split[0], r)) for r in split[2:]]


def number(cell: str) -> int:
    return int(cell.replace(",", ""))


def assert_funnel(card: str, filter_dir: Path) -> None:
    """The card's funnel for this filter stage is its report.json's: rows in, each step, rows out."""
    report = json.loads((filter_dir / "report.json").read_text())
    rows = table_under(card, f"### Funnel of the `filter` stage ({filter_dir.name})")
    assert rows[0]["filter"] == "rows in" and number(rows[0]["remaining"]) == report["rows_in"]
    assert rows[-1]["filter"] == "rows out" and number(rows[-1]["remaining"]) == report["rows_out"]
    assert [(r["filter"], r["reason"], number(r["dropped"]), number(r["remaining"])) for r in rows[1:-1]] == [
        (s["filter"], s["reason"], s["dropped"], s["remaining"]) for s in report["funnel"]
    ]


def assert_sampling(card: str, generate_dir: Path) -> None:
    """The sampling parameters are the generate manifest's, and the teacher is named, not located."""
    config = json.loads((generate_dir / "_manifest.json").read_text())["config"]
    rows = {r["parameter"]: r["value"] for r in table_under(card, "### Sampling parameters")}
    for key in ("n", "temperature", "top_p", "max_tokens", "seed", "dtype"):
        assert rows[key] == (config[key] if isinstance(config[key], str) else json.dumps(config[key])), key
    # The shipped teacher by its directory's name, pinned by its content where the stage recorded it.
    identity = config.get("teacher_identity") or ""
    pin = f"@{identity[: len('sha256:') + 16]}" if identity.startswith("sha256:") else ""
    assert rows["teacher"] == Path(config["teacher"]).name + pin


def assert_nothing_local(folder: Path, run: Path) -> None:
    for name in ("README.md", "provenance.json"):
        text = (folder / name).read_text()
        for private in ("/tmp", str(run), str(Path.home()), str(Path(reasonkit.__file__).parent)):
            assert private not in text, (name, private)
        assert ABSOLUTE.findall(text) == [], name


def test_card_of_the_verified_traces(quickstart_run, tmp_path):
    done = push(quickstart_run / "verified", tmp_path / "card")
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "card" / "README.md").read_text()
    assert_funnel(card, quickstart_run / "verified")
    assert_sampling(card, quickstart_run / "traces")
    assert "No `generate` manifest is reachable" not in card
    assert_nothing_local(tmp_path / "card", quickstart_run)
    # the rows themselves name the teacher by content, not by a path of this machine
    import pyarrow.parquet as pq

    tables = [f for f in (tmp_path / "card").rglob("*.parquet") if "teacher" in pq.read_schema(f).names]
    assert tables, "the kept traces carry the teacher column"
    teachers = {t for f in tables for t in pq.read_table(f, columns=["teacher"])["teacher"].to_pylist()}
    assert len(teachers) == 1 and re.fullmatch(r"teacher@sha256:[0-9a-f]{16}", teachers.pop())
    # Decontamination: the eval set the recipe checked, and the rows it dropped (zeros too), as the funnel counts them.
    report = json.loads((quickstart_run / "verified" / "report.json").read_text())
    assert "Checked against: `.../qs/eval_problems`\n" in card
    assert (
        {r["benchmark / reason"]: number(r["rows dropped"]) for r in table_under(card, "### Decontamination")}
        == {
            s["reason"].split(":", 1)[1]: s["dropped"]
            for s in report["funnel"]
            if s["reason"].startswith("contaminated:")
        }
        == {"eval_problems": 0}
    )
    lineage = json.loads((tmp_path / "card" / "provenance.json").read_text())["lineage"]
    assert [link["manifest"]["stage"] for link in lineage] == ["filter", "generate", "synth"]


def test_card_of_the_pairs(quickstart_run, tmp_path):
    assert json.loads((quickstart_run / "pairs" / "_manifest.json").read_text())["rows"] > 0  # pushable
    done = push(quickstart_run / "pairs", tmp_path / "card")
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "card" / "README.md").read_text()
    assert_funnel(card, quickstart_run / "student_verified")  # one stage up: the student's samples filtered
    assert_sampling(card, quickstart_run / "student_samples")
    assert_nothing_local(tmp_path / "card", quickstart_run)
    lineage = json.loads((tmp_path / "card" / "provenance.json").read_text())["lineage"]
    assert [link["manifest"]["stage"] for link in lineage] == ["pairs", "filter", "generate", "synth"]


@contextlib.contextmanager
def moved_away(run: Path):
    """The run directory gone from where its manifests recorded it (restored afterwards)."""
    away = run.with_name(run.name + "-away")
    run.rename(away)
    try:
        yield away
    finally:
        away.rename(run)


def test_a_moved_run_still_has_its_provenance(quickstart_run, tmp_path):
    elsewhere = tmp_path / "archive" / "qs"
    shutil.copytree(quickstart_run, elsewhere, ignore=shutil.ignore_patterns("sft", "dpo", "student", "eval_[st]*"))
    with moved_away(quickstart_run):
        done = push(elsewhere / "verified", tmp_path / "card")
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "card" / "README.md").read_text()
    assert_funnel(card, elsewhere / "verified")
    assert_sampling(card, elsewhere / "traces")


def test_a_stage_moved_alone_gets_a_card_that_says_where_provenance_stops(quickstart_run, tmp_path):
    shutil.copytree(quickstart_run / "verified", tmp_path / "lonely" / "verified")
    with moved_away(quickstart_run):
        done = push(tmp_path / "lonely" / "verified", tmp_path / "card")
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "card" / "README.md").read_text()
    assert_funnel(card, tmp_path / "lonely" / "verified")  # its own report still travels with it
    notes = [line for line in card.splitlines() if "provenance stops at this stage" in line]
    assert notes == [
        "- inputs `.../qs/traces`, `.../qs/eval_problems` are not reachable from here (moved or "
        "deleted since this stage read them); provenance stops at this stage"
    ]
    assert "No `generate` manifest is reachable" in card
    assert_nothing_local(tmp_path / "card", quickstart_run)
    assert f"note: the card says: {notes[0][2:]}" in done.stderr  # said before anything is uploaded
