"""``distill inspect DIR``: what a stage directory holds, at a glance.

Named ``inspect_stage`` rather than ``inspect`` so that running Python from the repository root
never shadows the standard library's ``inspect``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from reasonkit.errors import UserError


def describe(path: str | Path) -> dict:
    """Manifest summary, schema, per-shard counts, one sample row and the dataset configs of a stage
    directory; of a directory of stages (an eval's, a GRPO run's), its configs alone."""
    import pyarrow.parquet as pq

    from reasonkit.stage_card import layout_of
    from reasonkit.store import is_stage_dir, load_manifest

    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such directory")
    container = None if is_stage_dir(path) else layout_of(path)
    if container is not None:
        return {
            "path": str(path),
            "stage": container[0],
            "configs": configs(path, layout=container[1]),
            "card": card_state(path),
        }
    manifest = load_manifest(path)
    shards = manifest.get("shards", [])
    info = {
        "path": str(path),
        "stage": manifest.get("stage"),
        "kind": manifest.get("kind"),
        "complete": bool(manifest.get("complete")),
        "rows": manifest.get("rows", 0),
        "tokens": manifest.get("tokens", 0),
        "shards": len(shards),
        "config_fingerprint": manifest.get("config_fingerprint"),
        "input_fingerprint": manifest.get("input_fingerprint"),
        "schema": None,
        "sample_row": None,
        "subdirs": sorted(p.name for p in path.iterdir() if (p / "_manifest.json").is_file()),
        "configs": configs(path, manifest=manifest),
        "card": card_state(path),
    }
    if shards:
        first = path / shards[0]["file"]
        try:
            table = pq.read_table(first)
        except Exception as e:
            raise UserError(f"{first}: unreadable shard ({str(e).splitlines()[0]})") from None
        info["schema"] = {f.name: str(f.type) for f in table.schema}
        if table.num_rows:
            info["sample_row"] = table.slice(0, 1).to_pylist()[0]
    return info


def configs(path: Path, *, manifest: dict | None = None, layout: list[str] | None = None) -> list[dict]:
    """Each dataset config the directory offers (its card's, or the card it would have), and the line loading it."""
    from reasonkit.stage_card import load_line
    from reasonkit.store import card_tables

    tables = card_tables(path, manifest=manifest, layout=layout)
    return [
        {
            "config": t.name,
            "table": t.kind,
            "rows": t.rows,
            "complete": t.complete,
            "load": load_line(str(path), t, default=i == 0),
        }
        for i, t in enumerate(tables)
    ]


def card_state(path: Path) -> str:
    """Whether ``load_dataset`` reads the directory by reasonkit's card, and what to do where it does not."""
    from reasonkit.stage_card import CARD, is_ours

    if is_ours(path):
        return "written"
    if (path / CARD).exists():
        return f"{CARD} is not reasonkit's: its configs, if any, decide what load_dataset reads; left as it is"
    return (
        f"missing (written before reasonkit wrote cards): load_dataset may misread it; "
        f"`distill inspect {path} --write-card` writes it"
    )


@click.command("inspect")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON.")
@click.option("--width", default=200, show_default=True, help="Truncate sample values to this many characters.")
@click.option(
    "--write-card",
    is_flag=True,
    help="Write the dataset card (.huggingface.yaml) of a directory made before "
    "reasonkit wrote one, so load_dataset(DIR) reads its tables; a card not reasonkit's is left alone.",
)
def inspect(directory: str, as_json: bool, width: int, write_card: bool) -> None:
    """Show a stage directory: manifest, schema, row counts, completeness, one sample row, and the
    dataset configs it offers with the line of Python that loads each."""
    if write_card:
        from reasonkit.stage_card import layout_of
        from reasonkit.store import load_manifest
        from reasonkit.store import write_card as write

        if layout_of(Path(directory)) is None:  # a directory of stages rewrites the card it has
            load_manifest(directory)  # a damaged or foreign directory: one line saying so, and no card
        write(directory)
    info = describe(directory)
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if "rows" not in info:  # a directory of stages: its configs are all there is
        console.print(f"[bold]{info['path']}[/]  a directory of the {info['stage']} stage")
        _print_configs(console, info)
        return
    state = "[green]complete[/]" if info["complete"] else "[yellow]INCOMPLETE[/]"
    console.print(f"[bold]{info['path']}[/]  stage={info['stage']} kind={info['kind']}  {state}")
    console.print(
        f"rows={info['rows']}  shards={info['shards']}  completion tokens={info['tokens']}  "
        f"config={info['config_fingerprint']}  input={info['input_fingerprint']}"
    )
    if info["subdirs"]:
        console.print(f"sub-stages: {', '.join(info['subdirs'])}")
    _print_configs(console, info)
    if info["schema"]:
        table = Table("column", "type", "sample row", show_lines=False)
        row = info["sample_row"] or {}
        for name, type_ in info["schema"].items():
            value = repr(row.get(name))
            table.add_row(name, type_, value if len(value) <= width else value[: width - 3] + "...")
        console.print(table)


def _print_configs(console, info: dict) -> None:
    from rich.markup import escape

    console.print(f"dataset card: {escape(info['card'])}")
    for c in info["configs"]:
        rows = "not written yet" if c["rows"] is None else f"{c['rows']} rows"
        state = "" if c["complete"] else ", incomplete"
        console.print(f"  {c['config']} ({c['table'] or '-'}, {rows}{state}): {escape(c['load'])}", soft_wrap=True)
