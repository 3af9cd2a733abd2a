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
    """Manifest summary, schema, per-shard counts and one sample row of a stage directory."""
    import pyarrow.parquet as pq

    from reasonkit.store import load_manifest

    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such directory")
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


@click.command("inspect")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON.")
@click.option("--width", default=200, show_default=True, help="Truncate sample values to this many characters.")
def inspect(directory: str, as_json: bool, width: int) -> None:
    """Show a stage directory: manifest, schema, row counts, completeness and one sample row."""
    info = describe(directory)
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    state = "[green]complete[/]" if info["complete"] else "[yellow]INCOMPLETE[/]"
    console.print(f"[bold]{info['path']}[/]  stage={info['stage']} kind={info['kind']}  {state}")
    console.print(
        f"rows={info['rows']}  shards={info['shards']}  completion tokens={info['tokens']}  "
        f"config={info['config_fingerprint']}  input={info['input_fingerprint']}"
    )
    if info["subdirs"]:
        console.print(f"sub-stages: {', '.join(info['subdirs'])}")
    if info["schema"]:
        table = Table("column", "type", "sample row", show_lines=False)
        row = info["sample_row"] or {}
        for name, type_ in info["schema"].items():
            value = repr(row.get(name))
            table.add_row(name, type_, value if len(value) <= width else value[: width - 3] + "...")
        console.print(table)
