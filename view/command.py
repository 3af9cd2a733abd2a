"""``distill view PATH``: one page to look at a stage directory or a recipe run, offline (or served on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path

import click

from reasonkit.view.records import DEFAULT_PER_REASON, DEFAULT_ROWS

#: The page's name in a run or stage directory (report.md links it there).
PAGE = "view.html"


def default_out(path: str | Path) -> Path:
    return Path(path) / PAGE


@click.command("view")
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None, help=f"The HTML file to write [PATH/{PAGE}].")
@click.option(
    "--rows",
    type=click.IntRange(min=1),
    default=DEFAULT_ROWS,
    show_default=True,
    help="Rows of each table put on the page; a larger table is sampled, with the counts stated.",
)
@click.option(
    "--per-reason",
    type=click.IntRange(min=0),
    default=DEFAULT_PER_REASON,
    show_default=True,
    help="Dropped rows kept per drop reason within --rows (whole prompts), so every reason is represented.",
)
@click.option(
    "--serve",
    is_flag=True,
    help="Serve the page on 127.0.0.1 with every row read from the Parquet shards "
    "on demand (tables too large to embed), instead of writing a file.",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8765,
    show_default=True,
    help="--serve: the port (0: any free one).",
)
def view(path: str, out: str | None, rows: int, per_reason: int, serve: bool, port: int) -> None:
    """One self-contained HTML page of a stage directory or a whole recipe run: the filter's funnel with each
    drop reason linked to its rows, filters and search, traces with the think block folded, pairs side by
    side, evaluations problem by problem (two side by side), GRPO rollouts by step, tool-use trajectories, and
    the run's report. It makes no network request and opens from disk in any browser; model text on it is text.

    \b
    distill view runs/quickstart                      # writes runs/quickstart/view.html
    distill view runs/r1/verified --out verified.html --rows 5000
    distill view runs/r1 --serve --port 8765          # every row, read on demand
    """
    from reasonkit.view.collect import collect
    from reasonkit.view.records import Options

    found = collect(path, Options(rows=rows, per_reason=per_reason, remote=serve))
    if serve:
        _serve(found, port)
        return
    from reasonkit.view.page import write

    target = write(found.data, out or default_out(path))
    click.echo(f"view: {target} ({target.stat().st_size / 1e6:.1f} MB)")
    for line in sampled_lines(found.data):
        click.echo(f"  {line}")


def sampled_lines(data: dict) -> list[str]:
    """One line per table the page holds a sample of, with its counts."""
    lines = []
    for key, table in data["tables"].items():
        note = table.get("note") or {}
        if note and note["shown"] < note["total"]:
            lines.append(
                f"{key}: {note['shown']:,} of {note['total']:,} rows (--rows, --per-reason; --serve shows all)"
            )
    return lines


def _serve(found, port: int) -> None:
    from reasonkit.errors import UserError
    from reasonkit.view.page import render
    from reasonkit.view.serve import HOST, serve

    try:
        server = serve(render(found.data, served=True), found.sources, port)
    except OSError as e:
        raise UserError(f"--port {port}: cannot listen on {HOST} ({e.strerror or e})") from None
    click.echo(f"view: http://{HOST}:{server.server_address[1]}/ (Ctrl-C stops it)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
