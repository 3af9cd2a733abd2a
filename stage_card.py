"""The dataset card of a stage directory: ``.huggingface.yaml``, whose ``configs:`` say which files are which table.

Without it ``datasets.load_dataset(DIR)`` guesses from file extensions: a filter's directory (kept
verdicts, ``rejected/``, ``sft/``) came back as one split of all three, and a pairs directory with more
JSON files than shards was read with the JSON builder (issue 37). With it, as on the Hub, ``load_dataset(DIR)``
reads the main table and ``load_dataset(DIR, "sft")`` the sub-table ``sft``; metadata (``_manifest.json``,
``report.json``, ``summary.json``) is never read as rows. store.py writes it at every manifest save, so it
is as current as the manifest; this module only renders it from what store.py found (:class:`Table`).

Why ``.huggingface.yaml`` and not a ``README.md`` with YAML front matter: ``datasets`` reads either (the
standalone file's keys win), but a visible non-Parquet file breaks the other line everyone types,
``pd.read_parquet(DIR)`` / ``pq.read_table(DIR)``: pyarrow skips only names starting with ``.`` or ``_``
(as it skips ``_manifest.json``). What a README would say to a person is here as YAML comments; the README
of a pushed dataset is hub/card.py's.

>>> t = [Table("default", "part-*.parquet", "sft", 3, 1, True),
...      Table("rejected", "rejected/part-*.parquet", "verdicts", 0, 0, True)]
>>> configs(t)[0]
{'config_name': 'default', 'data_files': [{'split': 'train', 'path': 'part-*.parquet'}], 'default': True}
>>> load_line("runs/v", t[1])
'load_dataset("runs/v", "rejected", split="train")'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

CARD = ".huggingface.yaml"
SPLIT = "train"  # every table is one split, named as `distill push` and TRL's --dataset_train_split default name it
#: Opens the comment that marks a card as reasonkit's (rewritten at each commit) and holds a container's layout.
_MARK = "# reasonkit stage card "
#: Tables a TRL trainer takes as they are: the one the card's TRL example names, where there is one.
_TRAINABLE = ("sft", "sft_tools", "prefs", "prefs_text", "steps")
_MARK_LINE = re.compile("^" + re.escape(_MARK) + r"(\{.*\})$", re.M)


@dataclass(frozen=True)
class Table:
    """One table of a directory, as one dataset config."""

    name: str  # the config name: "default" for a stage's own table, else the sub-stage folder or file stem
    path: str  # its data files, relative to the card's folder (a glob of shards, or one file)
    kind: str | None  # schema.py's table kind (None: not recorded)
    rows: int | None  # None: not written yet
    shards: int
    complete: bool
    tokens: int = 0  # completion tokens, where the table has them


def configs(tables: list[Table], split: str = SPLIT) -> list[dict]:
    """The YAML ``configs:`` list: one config per table, the first the default."""
    return [
        {
            "config_name": t.name,
            "data_files": [{"split": split, "path": t.path}],
            **({"default": True} if i == 0 else {}),
        }
        for i, t in enumerate(tables)
    ]


def configs_yaml(tables: list[Table], split: str = SPLIT) -> str:
    """:func:`configs` as YAML, written out here: PyYAML's emitter cost a millisecond a commit. Scalars are
    JSON strings, which YAML reads as the same strings whatever they hold.

    >>> import yaml
    >>> t = [Table("default", "part-*.parquet", None, 1, 1, True), Table("a: b", "a: b/x.parquet", None, 0, 0, True)]
    >>> yaml.safe_load(configs_yaml(t)) == {"configs": configs(t)}
    True
    """
    lines = ["configs:"]
    for entry in configs(tables, split):
        lines += [f"- config_name: {json.dumps(entry['config_name'])}", "  data_files:"]
        for files in entry["data_files"]:
            lines += [f"  - split: {json.dumps(files['split'])}", f"    path: {json.dumps(files['path'])}"]
        lines += ["  default: true"] if entry.get("default") else []
    return "\n".join(lines)


def load_line(where: str, table: Table, *, default: bool | None = None, split: str = SPLIT) -> str:
    """The one line of Python that loads ``table`` of the dataset at ``where`` (a folder or a Hub id)."""
    is_default = table.name == "default" if default is None else default
    name = "" if is_default else f", {json.dumps(table.name)}"
    return f"load_dataset({json.dumps(where)}{name}, split={json.dumps(split)})"


def tables_section(where: str, tables: list[Table], *, split: str = SPLIT) -> list[str]:
    """The configs as a Markdown table, each with the line that loads it (the stage card's and `distill push`'s)."""
    lines = [
        "| config | table | rows | shards | completion tokens | complete "
        "| load with `from datasets import load_dataset` |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for i, t in enumerate(tables):
        rows = "not written yet" if t.rows is None else f"{t.rows:,}"
        name = f"`{t.name}`" + (" (default)" if i == 0 and t.name != "default" else "")
        lines.append(
            f"| {name} | {t.kind or '-'} | {rows} | {t.shards} | {f'{t.tokens:,}' if t.tokens else '-'} | "
            f"{'yes' if t.complete else '**no**'} | `{load_line(where, t, default=i == 0, split=split)}` |"
        )
    return lines


def render(where: str, tables: list[Table], *, stage: str | None, layout: list[str] | None = None) -> str:
    """The card of the directory at ``where`` (the path the stage was given): what each table is, as YAML
    comments, then the configs.

    ``layout``: a container's declared tables (an eval's ``problems.parquet``, ``samples``, ...), kept in the
    marker so a sub-stage's commit can render its parent's card again (:func:`layout_of`).

    >>> import yaml
    >>> card = render("runs/v", [Table("default", "part-*.parquet", "sft", 3, 1, False)], stage="filter")
    >>> yaml.safe_load(card) == {"configs": configs([Table("default", "part-*.parquet", "sft", 3, 1, False)])}
    True
    >>> print(card.splitlines()[1][:74])
    # **Incomplete**: the stage has not finished (`default` has 3 rows so far)
    """
    main, others = tables[0], tables[1:]
    if main.name == "default":
        what = f"A reasonkit stage directory: the `{main.kind or 'untyped'}` table of the `{stage or '?'}` stage"
        what += f", with its sub-tables {', '.join(f'`{t.name}`' for t in others)}." if others else "."
    else:
        what = (
            f"A reasonkit `{stage or '?'}` directory of {len(tables)} table{'s' if len(tables) > 1 else ''}; "
            f"`load_dataset` reads `{main.name}` unless another config is named."
        )
    example = next((t for t in tables if t.kind in _TRAINABLE), others[0] if others else main)
    prose = [f"{Path(where).name}: {what}", *_state(tables), ""]
    prose += tables_section(where, tables) + [""]
    # On a config's files, not the folder: pyarrow (so pandas) reads sub-folders too, and a stage's report.json
    prose += [
        f'Other readers, on a config\'s data files: polars `pl.read_parquet("{where}/{example.path}")`, '
        f'pandas `pd.read_parquet(sorted(glob.glob("{where}/{example.path}")))`; '
        f"TRL's CLIs `--dataset_name {where}"
        + (f" --dataset_config {example.name}`." if example is not main else "`.")
        + " The JSON files beside them (`_manifest.json`, `report.json`, ...) are the stage's records,"
        " never rows."
    ]
    out = [f"# {line}".rstrip() for line in prose]
    out += [_MARK + json.dumps({"stage": stage, "layout": layout}), configs_yaml(tables), ""]
    return "\n".join(out)


def _state(tables: list[Table]) -> list[str]:
    """One line saying the directory is incomplete, and which tables are why (nothing when complete)."""
    unfinished = [t for t in tables if not t.complete]
    if not unfinished:
        return []
    why = ", ".join(
        f"`{t.name}` " + ("not written yet" if t.rows is None else f"has {t.rows:,} rows so far") for t in unfinished
    )
    return [
        f"**Incomplete**: the stage has not finished ({why}). `load_dataset` reads the rows committed so far; "
        "reasonkit's readers refuse them unless `--allow-incomplete`; rerunning the stage resumes it."
    ]


def is_ours(folder: Path) -> bool:
    """Whether ``folder`` holds a card reasonkit wrote (and may rewrite); a card of anyone else's is left alone."""
    return _marker(folder) is not None


def layout_of(folder: Path) -> tuple[str | None, list[str]] | None:
    """``(stage, layout)`` of a container's card (see :func:`render`), None for any other folder."""
    found = _marker(folder)
    if not found or not isinstance(found.get("layout"), list):
        return None
    return found.get("stage"), [str(x) for x in found["layout"]]


def _marker(folder: Path) -> dict | None:
    try:
        text = (folder / CARD).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    match = _MARK_LINE.search(text)
    if not match:
        return None
    try:
        found = json.loads(match.group(1))
    except json.JSONDecodeError:
        return None
    return found if isinstance(found, dict) else None
