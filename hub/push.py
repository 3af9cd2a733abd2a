"""`distill push`: publish a stage directory as a Hugging Face Hub dataset with a generated card.

The repository holds the stage's Parquet shards byte for byte (copied under new names, never
rewritten), one dataset config per table, a ``README.md`` card (YAML metadata, then provenance:
see :mod:`reasonkit.hub.card`) and ``provenance.json``, its machine-readable twin. The card is the stage
directory's own (stage_card.py: the same config names and table section, with the repository's paths) with
the provenance added: one card (the local ``.huggingface.yaml`` is not uploaded)::

    README.md
    provenance.json
    data/train-00000-of-00002.parquet ...     config "default": the stage's own table
    rejected/train-00000-of-00001.parquet     config "rejected": a sub-stage directory (filter)
    sft/train-00000-of-00001.parquet          config "sft"

``--dry-run FOLDER`` writes exactly those files and uploads nothing; ``datasets.load_dataset(FOLDER)``
reads it as the Hub would. Every check (repo id, split, a complete stage directory whose shards are
all there and agree on a schema, a token) runs before any file is written or any request is made.

The token comes from ``HF_TOKEN`` or the login cache (``huggingface_hub.get_token``) and is handed
to the Hub client only: it is never printed, logged, or written into a card or a manifest, and
the generated files are checked not to contain it before they leave.

Nothing heavy is imported at module level: ``distill --help`` loads this module's command object.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import click

from reasonkit.errors import UserError

# ORG/NAME as the Hub allows it: letters, digits, "_", "-", "." (no "--" or "..", no ".git" end).
_REPO = re.compile(r"\w(?:[\w.-]{0,94}\w)?/\w(?:[\w.-]{0,94}\w)?", re.ASCII)
_SPLIT = re.compile(r"\w+(?:\.\w+)*")  # datasets' split-name rule
_LICENSE = re.compile(r"[a-z0-9][a-z0-9.+-]*")  # Hub license ids: apache-2.0, mit, cc-by-4.0, other...
_RESERVED = {"default", "data"}  # sub-stage names that would collide with the main config's name or folder


# long: the publishing steps in order (scan, card, provenance, upload), each reading the ones before
def push(
    dir: str | os.PathLike,
    repo: str,
    *,
    private: bool = False,
    split: str = "train",
    dry_run: str | os.PathLike | None = None,
    token: str | None = None,
    license: str = "other",
    recipe: str | os.PathLike | None = None,
    allow_secrets: bool = False,
) -> dict:
    """Publish the stage directory ``dir`` as the dataset repository ``repo`` (or write it to ``dry_run``).

    Returns ``{"repo", "configs": {name: rows}, "files": [paths in repo], "dry_run", "url", "commit",
    "deleted", "notes"}``; ``url``/``commit`` are None on a dry run. Raises :class:`UserError` before any
    work for a bad repo id or split, an incomplete or non-stage directory, a missing shard, a
    non-empty dry-run folder, or (unless dry-running) no token or offline mode; and, after reading the
    tables but before writing or uploading anything, for a credential-shaped string in any string
    column or generated file (hub/secrets.py), unless ``allow_secrets``.
    """
    from reasonkit.hub import card as hub_card
    from reasonkit.hub import provenance as hub_provenance

    stage_dir = Path(dir)
    _check_names(repo, split, license)
    folder = Path(dry_run) if dry_run is not None else None
    if folder is not None:
        _check_folder(folder, stage_dir)
    else:
        token = _resolve_token(token)  # before reading thousands of shard footers
    if recipe is not None and not Path(recipe).is_file():
        raise UserError(f"--recipe {recipe}: no such file")
    configs, skipped = _collect(stage_dir, split)
    if not allow_secrets:
        _check_no_secrets_in_tables(configs)

    chain = hub_provenance.lineage(stage_dir, configs[0].manifest)
    card = hub_card.render(
        repo, configs, skipped, chain, split=split, license=license, recipe=hub_provenance.recipe_text(recipe, chain)
    )
    texts = {
        "README.md": card,
        "provenance.json": json.dumps(hub_provenance.provenance(configs, chain), indent=2, default=str) + "\n",
    }
    _check_no_secret(texts, token or os.environ.get("HF_TOKEN"), allow_secrets)
    files = {path: src for c in configs for path, src in zip(c.files, c.shards)}

    result = {
        "repo": repo,
        "configs": {c.name: c.rows for c in configs},
        "files": list(texts) + list(files),
        "dry_run": str(folder) if folder is not None else None,
        "url": None,
        "commit": None,
        "deleted": [],
        # Where the card's provenance stops short (an input moved or changed): said on the terminal too.
        "notes": [n for link in chain for n in link.notes if "provenance stops" in n],
    }
    if folder is not None:
        _write_folder(folder, texts, files)
    else:
        result.update(_upload(repo, texts, files, token=token, private=private, configs=configs))
    return result


# -- checks (all before any work) ----------------------------------------------------------------


def _check_names(repo: str, split: str, license: str) -> None:
    if not _REPO.fullmatch(repo or "") or "--" in repo or ".." in repo or repo.endswith(".git"):
        raise UserError(
            f"--repo {repo!r}: not a Hub repository id; expected ORG/NAME "
            "(letters, digits, '-', '_', '.'; at most 96 characters each; no '--' or '..')"
        )
    if not _SPLIT.fullmatch(split or ""):
        raise UserError(
            f"--split {split!r}: a split name is letters, digits and '_' (parts joined by '.'), e.g. train"
        )
    if not _LICENSE.fullmatch(license or ""):
        raise UserError(
            f"--license {license!r}: expected a Hub license id such as apache-2.0, mit, cc-by-4.0 or other"
        )


def _collect(stage_dir: Path, split: str) -> tuple[list, dict[str, str]]:
    """The configs to publish (the stage's table first, then sub-stages by name) and why others were not.

    A sub-stage without a table kind (the judges' ``record/`` work log) is not a table of the
    contract: it is left out, and so is an empty one (a config must have files to load).
    """
    from reasonkit.hub import card as hub_card
    from reasonkit.hub import provenance as hub_provenance
    from reasonkit.store import load_manifest, sub_stages

    if not stage_dir.is_dir():
        raise UserError(f"{stage_dir}: no such directory")
    # the stage directory's own card names its configs the same way (store.card_tables)
    tables = [("default", stage_dir)] + [(p.name, p) for p in sub_stages(stage_dir)]
    configs, skipped = [], {}
    for name, path in tables:
        manifest = load_manifest(path)
        if name != "default" and manifest.get("kind") is None:
            skipped[name] = "a work record without a table kind"
            continue
        if name != "default" and name in _RESERVED:
            raise UserError(f"{path}: a sub-stage may not be named {name!r} (reserved for the main table)")
        shards = _checked_shards(path, manifest)
        if not shards:
            if name == "default":
                raise UserError(f"{path}: stage {manifest.get('stage')!r} has no rows; nothing to publish")
            skipped[name] = "empty"
            continue
        folder, n = hub_card.folder_of(name), len(shards)
        files = [f"{folder}/{split}-{i:05d}-of-{n:05d}.parquet" for i in range(n)]
        configs.append(hub_provenance.Config(name, path, manifest, shards, files))
    return configs, skipped


def _checked_shards(path: Path, manifest: dict) -> list[Path]:
    """The shards of a complete stage, each present, a readable Parquet file of the recorded row
    count, and all of one schema (else ``datasets`` would fail on the Hub, after the upload)."""
    import pyarrow.parquet as pq

    from reasonkit.store import shard_paths

    shards = shard_paths(path)  # refuses an incomplete directory, or one missing a listed shard
    recorded = {s["file"]: s.get("rows") for s in manifest.get("shards", [])}
    first = None
    for shard in shards:
        try:
            meta = pq.ParquetFile(shard).metadata
            schema = pq.read_schema(shard).remove_metadata()
        except Exception as e:  # pyarrow raises several types for a torn or foreign file
            raise UserError(f"{shard}: not a readable Parquet file ({e})") from None
        if recorded.get(shard.name) is not None and meta.num_rows != recorded[shard.name]:
            raise UserError(f"{shard}: holds {meta.num_rows} rows, the manifest says {recorded[shard.name]}")
        if first is None:
            first = (shard, schema)
        elif not schema.equals(first[1]):
            raise UserError(f"{shard}: schema differs from {first[0].name}; every shard of a table must share one")
    return shards


def _check_folder(folder: Path, stage_dir: Path) -> None:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"--dry-run {folder}: exists and is not an empty folder; choose a new or empty one")
    if folder.resolve().is_relative_to(stage_dir.resolve()):
        raise UserError(f"--dry-run {folder}: is inside the stage directory {stage_dir}; choose a folder outside it")


def _resolve_token(token: str | None) -> str:
    from huggingface_hub import constants, get_token

    token = token or get_token()
    if not token:
        raise UserError(
            "no Hugging Face token: set HF_TOKEN or run `hf auth login` (or pass --dry-run FOLDER to upload nothing)"
        )
    if constants.HF_HUB_OFFLINE:
        raise UserError("HF_HUB_OFFLINE is set, so nothing can be uploaded; unset it, or pass --dry-run FOLDER")
    return token


def _check_no_secret(texts: dict[str, str], token: str | None, allow_secrets: bool = False) -> None:
    from reasonkit.hub.secrets import find_in_texts

    for name, text in texts.items():
        if token and token in text:  # e.g. a recipe or a stage config that embedded it
            raise UserError(f"refusing to publish: the Hugging Face token appears in the generated {name}")
    found = [] if allow_secrets else find_in_texts(texts)
    if found:
        raise UserError(
            f"refusing to publish: a credential-shaped string appears in the generated {', '.join(found)}; "
            "remove it, or pass --allow-secrets if it is not a real credential"
        )


def _check_no_secrets_in_tables(configs) -> None:
    """Every string column of every table, shard by shard (memory stays one shard's)."""
    import pyarrow.parquet as pq

    from reasonkit.hub.secrets import find_secrets

    merged: dict[tuple[str, str], list] = {}
    for c in configs:
        for shard in c.shards:
            for f in find_secrets({c.name: pq.read_table(shard)}):
                merged.setdefault((f.table, f.column), []).append(f)
    if merged:
        from reasonkit.hub.secrets import Finding

        lines = [
            Finding(
                t,
                col,
                tuple(sorted({k for f in fs for k in f.kinds})),
                [i for f in fs for i in f.ids],
                sum(f.rows for f in fs),
            ).line()
            for (t, col), fs in merged.items()
        ]
        raise UserError(
            "refusing to publish: credential-shaped strings found: "
            + "; ".join(lines)
            + "; remove those rows, or pass --allow-secrets if they are not real credentials"
        )


# -- writing -------------------------------------------------------------------------------------


def _write_folder(folder: Path, texts: dict[str, str], files: dict[str, Path]) -> None:
    """Write the repository to a temp sibling, then rename it into place: never a half-written folder."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for name, text in texts.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(text)
        for path_in_repo, src in files.items():
            (tmp / path_in_repo).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, tmp / path_in_repo)  # the shard's bytes, unchanged
        if folder.exists():
            folder.rmdir()  # checked empty above
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _upload(repo: str, texts: dict[str, str], files: dict[str, Path], *, token: str, private: bool, configs) -> dict:
    """Create the dataset repo if needed and publish everything in one commit.

    Why ``create_commit`` and not ``upload_folder``: with ``hf_xet`` installed (it is here, and by
    default), ``upload_folder`` takes a streamed multi-commit pipeline whose requests differ from a
    plain commit, and it would need a folder on disk. ``create_commit`` always asks ``/preupload``
    how each file travels: the Hub answers "lfs" for Parquet, and the client then uploads through
    Xet (or classic LFS without ``hf_xet``); a server answering "regular" gets the files inline in
    the commit (the loopback server of the tests). One commit also makes the publish atomic: the
    card, the shards, and the deletion of stale shards from an earlier push land together.
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    api = HfApi(token=token)  # endpoint: HF_ENDPOINT, read by huggingface_hub at import
    main = configs[0].manifest
    try:
        url = api.create_repo(repo, repo_type="dataset", private=True if private else None, exist_ok=True)
        try:
            existing = api.list_repo_files(repo, repo_type="dataset")
        except _not_found_errors():
            existing = []
        new = set(texts) | set(files)
        stale = sorted(p for p in existing if p.endswith(".parquet") and p not in new)
        ops = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=text.encode()) for name, text in texts.items()]
        ops += [CommitOperationAdd(path_in_repo=p, path_or_fileobj=str(src)) for p, src in files.items()]
        ops += [CommitOperationDelete(path_in_repo=p) for p in stale]
        info = api.create_commit(
            repo,
            ops,
            repo_type="dataset",
            commit_message=f"reasonkit push: {main.get('stage')} ({sum(c.rows for c in configs)} rows)",
            commit_description=f"Configs: {', '.join(f'{c.name} ({c.rows} rows)' for c in configs)}.",
        )
    except _network_errors() as e:
        raise UserError(f"push to {repo} failed: {_first_line(e)}") from None
    except ValueError as e:  # the Hub rejected the card's YAML (validated before any upload)
        raise UserError(f"push to {repo} failed: {_first_line(e)}") from None
    return {"url": str(url), "commit": info.oid, "deleted": stale}


def _network_errors() -> tuple[type[BaseException], ...]:
    """HTTP and connection errors of whichever HTTP client this huggingface_hub version uses."""
    import importlib

    errors: list[type[BaseException]] = [OSError]
    for module in ("httpx2", "httpx", "requests"):
        try:
            errors.append(importlib.import_module(module).HTTPError)
        except (ImportError, AttributeError):
            pass
    return tuple(errors)


def _not_found_errors() -> tuple[type[BaseException], ...]:
    from huggingface_hub.errors import EntryNotFoundError, RevisionNotFoundError

    return (RevisionNotFoundError, EntryNotFoundError)


def _first_line(e: BaseException) -> str:
    """One line: the HTTP status and the Hub's own message when there is a response, else the error."""
    response = getattr(e, "response", None)
    status = getattr(response, "status_code", None)
    if status is not None:
        reason = getattr(response, "reason_phrase", None) or getattr(response, "reason", None) or ""
        server = (getattr(e, "server_message", None) or "").strip().replace("\n", " ")
        hint = "; check that the token may write to this namespace" if status in (401, 403) else ""
        return f"HTTP {status} {reason}".rstrip() + (f": {server}" if server else "") + hint
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


# -- command line --------------------------------------------------------------------------------


@click.command("push")
@click.argument("dir", type=click.Path(path_type=Path))
@click.option("--repo", required=True, metavar="ORG/NAME", help="Dataset repository to create or update.")
@click.option("--private", is_flag=True, help="Create the repository private (an existing one keeps its visibility).")
@click.option("--split", default="train", show_default=True, help="Split name every table is published under.")
@click.option(
    "--dry-run",
    "dry_run",
    type=click.Path(path_type=Path),
    metavar="FOLDER",
    help="Write the repository to FOLDER (new or empty) and upload nothing; needs no token.",
)
@click.option("--license", "license_", default="other", show_default=True, help="Hub license id for the card.")
@click.option("--recipe", type=click.Path(path_type=Path), help="Recipe YAML to show in the card.")
@click.option(
    "--allow-secrets",
    is_flag=True,
    help="Publish even where a string column holds a credential-shaped "
    "string (hf_ tokens, sk- keys, AWS keys, private keys); without it the push is refused, naming the rows.",
)
def push_command(
    dir: Path,
    repo: str,
    private: bool,
    split: str,
    dry_run: Path | None,
    license_: str,
    recipe: Path | None,
    allow_secrets: bool,
) -> None:
    """Publish the stage directory DIR as a Hugging Face Hub dataset with a generated card.

    \b
    The token comes from HF_TOKEN or `hf auth login`; it is never printed or written.
    Example:
      distill push out/filtered --repo me/r1-distill-math --dry-run /tmp/preview
    """
    result = push(
        dir,
        repo,
        private=private,
        split=split,
        dry_run=dry_run,
        license=license_,
        recipe=recipe,
        allow_secrets=allow_secrets,
    )
    tables = ", ".join(f"{name} {rows:,} rows" for name, rows in result["configs"].items())
    for note in result["notes"]:
        click.echo(f"note: the card says: {note}", err=True)
    if result["dry_run"]:
        click.echo(f"dry run: wrote {len(result['files'])} files to {result['dry_run']} ({tables}); nothing uploaded")
    else:
        deleted = f"; removed {len(result['deleted'])} stale shard(s)" if result["deleted"] else ""
        click.echo(
            f"pushed {len(result['files'])} files to {result['url']} ({tables}; commit "
            f"{result['commit'][:10]}){deleted}"
        )
