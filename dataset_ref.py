"""Hugging Face datasets by reference: a Hub id, or a folder in the Hub's layout, with its config
and split, read by ``datasets.load_dataset`` whichever of the two it is.

Wherever reasonkit takes a dataset (``--prompts``, ``--data``, ``--decontam``, ``decontam_against``)
it takes a reference::

    SOURCE                     its only split (of its default, or only, config)
    SOURCE:SPLIT               HuggingFaceH4/aime_2024:train   HuggingFaceH4/MATH-500:test
    SOURCE:CONFIG:SPLIT        open-r1/OpenR1-Math-220k:default:train
    SOURCE@REVISION:...        a branch, tag or commit SHA of a Hub dataset

The order is the Hub viewer's (``/viewer/CONFIG/SPLIT``); ``:`` rather than brackets because
datasets' own split syntax uses brackets for slicing, which SPLIT passes through
(``HuggingFaceH4/MATH-500:test[:50]``). A single suffix that names a config and not a split is
read as the config (``open-r1/OpenR1-Math-220k:extended``). When no split is named and the dataset
has several, or no config is named and it has several without a default, that is one error line
listing them. A ``split`` field (``--split``) names the split the same way; both at once must agree.

SOURCE is a Hub id (``org/name``) or a local folder in the Hub's layout: what ``huggingface-cli
download --repo-type dataset ID --local-dir DIR`` leaves on an offline cluster, that is a README.md
whose YAML ``configs:`` name the data files, or data files under sub-folders
(``data/train-00000-of-00001.parquet``), or top-level files named for a split (``test.jsonl``).
Such a folder goes through the same ``datasets`` calls as the Hub id, so it reads exactly as the
Hub does; so does any other folder of data files once a split is named. (A folder of top-level
files named for no split, and a stage directory, are read by readers.py as they always were.)

>>> parse("HuggingFaceH4/aime_2024:train")
DatasetRef(source='HuggingFaceH4/aime_2024', config=None, split=None, revision=None, suffix='train')
>>> parse("open-r1/OpenR1-Math-220k@main:default:train").text
'open-r1/OpenR1-Math-220k@main:default:train'
>>> import tempfile
>>> parse(tempfile.mkdtemp()) is None   # a folder of no split (or a file, a stage): readers.py reads it
True
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from reasonkit.errors import UserError

#: Data file suffixes ``datasets`` reads from a folder (as readers.py reads them).
DATA_SUFFIXES = (".parquet", ".pq", ".jsonl", ".json", ".csv", ".arrow")


@dataclass(frozen=True)
class DatasetRef:
    """One split of one config of a dataset; ``config``/``split`` None until :func:`resolve`."""

    source: str
    config: str | None = None
    split: str | None = None
    revision: str | None = None
    # a single ``:NAME`` suffix: a split, or a config when the dataset has one by that name and no
    # such split (resolve decides, as only the dataset knows)
    suffix: str | None = None

    @property
    def text(self) -> str:
        """The reference as written back: ``SOURCE[@REVISION][:CONFIG]:SPLIT``."""
        head = self.source + (f"@{self.revision}" if self.revision else "")
        parts = [p for p in (self.config, self.suffix, self.split) if p is not None]
        return ":".join([head, *parts])

    @property
    def short_name(self) -> str:
        """A name for reports: the dataset's own name (``aime_2024``)."""
        return Path(self.source.rstrip("/")).name

    @property
    def split_name(self) -> str | None:
        """The split without datasets' slicing: ``test`` for ``test[:50]``."""
        return self.split.split("[", 1)[0] if self.split else None


def is_hub_id(text: str) -> bool:
    """``org/name``, with nothing on disk by that name."""
    return text.count("/") == 1 and not text.startswith((".", "/", "~")) and not os.path.exists(text)


def is_hub_folder(path: str | os.PathLike) -> bool:
    """Whether a folder is a dataset in the Hub's layout (see the module docstring), not a stage
    directory or a plain folder of data files for one split."""
    p = Path(path)
    if not p.is_dir() or (p / "manifest.json").is_file():
        return False
    if _readme_configs(p):
        return True
    top = [f for f in p.iterdir() if f.is_file() and f.suffix in DATA_SUFFIXES]
    if not top:
        return any(f.suffix in DATA_SUFFIXES for f in _visible_files(p))
    # files named for a split (MATH-500's test.jsonl; train.parquet + test.parquet, never concatenated);
    # datasets (a 2 s import) is asked only when some name holds one of its split words
    if not any(word in f.name.lower() for f in top for word in ("test", "val", "dev", "eval")):
        return False
    return _inferred_splits(p) not in ([], ["train"])


def parse(text: str, split: str | None = None) -> DatasetRef | None:
    """The reference ``text`` names, or None when it is a path readers.py reads itself (a file, a
    stage directory, a plain folder). ``split``: a ``--split`` given beside it."""
    text = str(text)
    if os.path.exists(text):
        named_split = split is not None and _data_folder(text)
        return DatasetRef(text, split=split) if named_split or is_hub_folder(text) else None
    head, *parts = text.split(":")
    source, revision = head, None
    if "@" in head and not os.path.exists(head):
        source, revision = head.rsplit("@", 1)
    if not (is_hub_id(source) or (parts and _data_folder(source)) or is_hub_folder(source)):
        return None
    if len(parts) > 2 or any(not p for p in parts) or (revision is not None and not revision):
        raise UserError(
            f"{text}: expected SOURCE, SOURCE:SPLIT or SOURCE:CONFIG:SPLIT (SOURCE a Hub id or a "
            "Hub-layout folder, optionally SOURCE@REVISION)"
        )
    if len(parts) == 1:
        return DatasetRef(source, None, split, revision, suffix=parts[0])
    if parts and split is not None and parts[1] != split:
        raise UserError(f"{text}: names split {parts[1]!r} but --split/split: says {split!r}; name it once")
    return DatasetRef(source, *(parts or [None, split]), revision)


def resolve(ref: DatasetRef) -> DatasetRef:
    """``ref`` with its config and split named, as the dataset has them (one ``datasets`` call for
    the configs, one for the splits); one UserError line naming what it has otherwise."""
    import datasets

    kwargs = {"revision": ref.revision} if ref.revision else {}
    with _errors(ref):
        configs = datasets.get_dataset_config_names(ref.source, **kwargs)
        config = ref.config
        if config is None:
            config = datasets.get_dataset_default_config_name(ref.source, **kwargs)
        if ref.suffix is not None:
            return resolve(_place_suffix(ref, configs, _splits(ref, config) if config in configs else []))
        if config is None:
            raise UserError(
                f"{ref.text}: no config named and it has several, with no default: {', '.join(configs)}; "
                f"name one ({ref.source}:{configs[0]}:SPLIT)"
            )
        if config not in configs:
            raise UserError(f"{ref.text}: no config {config!r}; its configs: {', '.join(configs)}")
        splits = _splits(ref, config)
    also = f" (config {config}; configs: {', '.join(configs)})" if len(configs) > 1 else ""
    if ref.split is None:
        if len(splits) != 1:
            prefix = f"{ref.source}:{config}" if len(configs) > 1 else ref.source
            raise UserError(
                f"{ref.text}: no split named and it has {len(splits)}: {', '.join(splits)}{also}; "
                f"name one ({prefix}:{splits[0]})"
            )
        return dataclasses.replace(ref, config=config, split=splits[0])
    if ref.split_name not in splits:
        raise UserError(f"{ref.text}: no split {ref.split_name!r}; it has: {', '.join(splits)}{also}")
    return dataclasses.replace(ref, config=config)


def _place_suffix(ref: DatasetRef, configs: list[str], default_splits: list[str]) -> DatasetRef:
    """``SOURCE:NAME`` as ``SOURCE:SPLIT`` (of the default config) or ``SOURCE:CONFIG``."""
    name = ref.suffix
    is_split = name.split("[", 1)[0] in default_splits
    if name in configs and (not is_split or (ref.split is not None and ref.split != name)):
        return dataclasses.replace(ref, config=name, suffix=None)
    if ref.split is not None and ref.split != name:
        raise UserError(f"{ref.text}: names split {name!r} but --split/split: says {ref.split!r}; name it once")
    return dataclasses.replace(ref, split=name, suffix=None)  # an unknown one: resolve lists the splits


def load_table(ref: DatasetRef):
    """The rows of the referenced split as an Arrow table (resolving the reference first)."""
    import datasets

    ref = resolve(ref)
    kwargs = {"revision": ref.revision} if ref.revision else {}
    with _errors(ref):
        ds = datasets.load_dataset(ref.source, ref.config, split=ref.split, **kwargs)
    if ds._indices is not None:  # a sliced or selected split: materialise the rows it names
        ds = ds.flatten_indices()
    return ds.data.table


def identity(ref: DatasetRef) -> str:
    """What the referenced split *is*: ``hub-dataset:ORG/NAME@<sha>:CONFIG:SPLIT`` for a Hub id
    (the revision it resolves to: identity.hub_revision), ``sha256:<16 hex>:CONFIG:SPLIT`` for a
    folder (its README and the split's data files, by content). A reference that does not resolve
    is named by its text (reading it then fails with the reason)."""
    from reasonkit.identity import file_sha256, hub_revision

    try:
        ref = resolve(ref)
    except UserError:  # still pinned to the revision: a moved Hub id is another input even unread
        sha = hub_revision(ref.source, "dataset", ref.revision) if is_hub_id(ref.source) else None
        return (
            f"hub-dataset:{ref.source}@{sha}:?{ref.text[len(ref.source) :]}"
            if sha
            else f"unresolved-dataset:{ref.text}"
        )
    where = f"{ref.config}:{ref.split}"
    if not is_hub_id(ref.source):
        import hashlib

        root = Path(ref.source)
        files = sorted({*_split_files(ref), *([root / "README.md"] if (root / "README.md").is_file() else [])})
        h = hashlib.sha256()
        for f in files:
            h.update(f"{f.relative_to(root).as_posix()}\0{file_sha256(f)}\n".encode())
        return f"sha256:{h.hexdigest()[:16]}:{where}"
    sha = hub_revision(ref.source, "dataset", ref.revision)
    return f"hub-dataset:{ref.source}@{sha}:{where}" if sha else f"unresolved-dataset:{ref.text}"


def dataset_identity(name: str, split: str | None = None) -> str | None:
    """What a Hugging Face dataset reference names, by content: for a Hub id
    ``hub-dataset:org/name@<sha>:CONFIG:SPLIT`` (the revision it resolves to), for a Hub-layout
    folder ``sha256:<16 hex>:CONFIG:SPLIT``; None when ``name`` is no dataset reference (a file,
    a stage directory, a plain folder: those are hashed by what they hold)."""
    try:
        ref = parse(name, split)
    except UserError:  # a malformed reference: reading it says why
        return None
    return identity(ref) if ref is not None else None


def _splits(ref: DatasetRef, config: str) -> list[str]:
    import datasets

    kwargs = {"revision": ref.revision} if ref.revision else {}
    return datasets.get_dataset_split_names(ref.source, config, **kwargs)


def _split_files(ref: DatasetRef) -> list[Path]:
    """The local data files of a resolved folder reference's split, as datasets resolves them."""
    import datasets

    with _errors(ref):
        files = datasets.load_dataset_builder(ref.source, ref.config).config.data_files or {}
    return [Path(f) for f in files.get(ref.split_name, [])]


def _data_folder(path: str) -> bool:
    """A folder datasets can read (not a stage directory): with a split named, any such folder is
    read by datasets, which names the splits of its files as the Hub would."""
    return os.path.isdir(path) and not os.path.isfile(os.path.join(path, "manifest.json"))


def _readme_configs(folder: Path) -> list:
    readme = folder / "README.md"
    if not readme.is_file():
        return []
    from huggingface_hub.repocard import metadata_load

    try:
        meta = metadata_load(readme) or {}
    except Exception:  # a README without valid YAML front matter names no configs
        return []
    configs = meta.get("configs")
    return configs if isinstance(configs, list) else []


def _visible_files(folder: Path):
    """Files under ``folder``, skipping hidden ones (``.cache/huggingface`` of a download)."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        yield from (Path(root) / f for f in files if not f.startswith("."))


def _inferred_splits(folder: Path) -> list[str]:
    """The splits datasets infers from a folder's file names (``train.parquet``, ``test-*.csv``)."""
    from datasets.data_files import get_data_patterns

    try:
        return list(get_data_patterns(str(folder)))
    except Exception:  # no data files datasets recognises
        return []


class _errors:
    """``datasets``' exceptions as one UserError line naming the reference."""

    def __init__(self, ref: DatasetRef):
        self.ref = ref

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if error is None or isinstance(error, UserError):
            return False
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        if is_hub_id(self.ref.source) and os.environ.get("HF_HUB_OFFLINE") == "1":
            raise UserError(
                f"{self.ref.text}: looks like a Hugging Face dataset id, but HF_HUB_OFFLINE=1 and it is not in the "
                f"local cache ({first}); on a machine with the Hub run `huggingface-cli download --repo-type dataset "
                f"{self.ref.source} --local-dir DIR`, copy DIR here and name DIR instead"
            ) from None
        raise UserError(f"{self.ref.text}: cannot load Hugging Face dataset ({first})") from None
