"""Content identities: what a model, adapter or dataset *is*, never where it lives.

Reused work is only correct when it was made by the same weights. A path says nothing about that
(a student retrained into the same folder keeps its path), so a stage records an identity:

- a local model or adapter directory: the sha256 of the files that decide its outputs (config,
  weights, tokenizer, generation config, chat template), ``sha256:1f0c...``;
- a Hub id: the revision SHA it resolves to, ``hub:org/name@<sha>`` (the Hub when online; the
  local cache's snapshot folder, as ``refs/main`` points to it, under ``HF_HUB_OFFLINE=1``);
- anything else: a name, ``api:deepseek-reasoner`` for a model behind an OpenAI-compatible API
  (no weights to hash), ``unresolved:NAME`` otherwise.

Every byte of a model is read at most once per process (files are memoised by path, size and
mtime_ns), and a stage keeps its model files' ``[size, mtime_ns, sha256]`` in its manifest
(:func:`file_record`), seeding the memo from it on the next run (:func:`remember`): a resumed run
over a 690 GB checkpoint rereads only files whose size or modification time changed.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "config.json").write_text("{}"); _ = (d / "notes.md").write_text("not a model file")
>>> [p.name for p in model_files(d)], model_identity(str(d)).startswith("sha256:")
(['config.json'], True)
>>> model_identity("deepseek-reasoner", api=True)
'api:deepseek-reasoner'
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: Top-level files of a model/adapter directory that decide what it generates. Checkpoint
#: folders, training logs and ``training_args.bin`` are not the model.
MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "adapter_config.json",
    "*.safetensors",
    "*.bin",
    "*.index.json",
    "*.gguf",
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.*",
    "merges.txt",
    "*.model",
    "*.tiktoken",
    "chat_template*",
)
_NOT_MODEL = ("training_args.bin", "optimizer*", "scheduler*", "rng_state*")

#: (resolved path, size, mtime_ns) -> sha256 hex of the file's bytes.
_MEMO: dict[tuple[str, int, int], str] = {}
_ANNOUNCE_BYTES = 1 << 30  # say on stderr why a command pauses before hashing more than this


def looks_like_hub_id(name: str) -> bool:
    """``org/name`` with no filesystem look: ``deepseek-ai/DeepSeek-R1`` yes, ``./out/model`` no."""
    return name.count("/") == 1 and not name.startswith((".", "/", "~")) and not os.path.exists(name)


def model_files(directory: str | os.PathLike) -> list[Path]:
    """The files of ``directory`` that identify a model or adapter, sorted by name."""
    return sorted(
        p
        for p in Path(directory).iterdir()
        if p.is_file()
        and not p.name.startswith(".")
        and any(fnmatch.fnmatch(p.name, pat) for pat in MODEL_FILES)
        and not any(fnmatch.fnmatch(p.name, pat) for pat in _NOT_MODEL)
    )


def data_files(directory: str | os.PathLike) -> list[Path]:
    """Every visible top-level file of a data folder (readers read its .parquet/.jsonl/.csv files)."""
    return sorted(p for p in Path(directory).iterdir() if p.is_file() and not p.name.startswith("."))


def _key(path: Path) -> tuple[str, int, int]:
    st = path.stat()  # follows a symlink (the Hub cache's snapshot -> blob): the bytes' size and time
    return str(path.parent.resolve() / path.name), st.st_size, st.st_mtime_ns


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 hex of a file's bytes, streamed; read once per (path, size, mtime_ns) per process."""
    key = _key(Path(path))
    if key not in _MEMO:
        with open(path, "rb") as f:
            _MEMO[key] = hashlib.file_digest(f, "sha256").hexdigest()
    return _MEMO[key]


def _hash_all(files: list[Path], what: str) -> list[str]:
    """The files' sha256, new ones read on a few threads (hashlib releases the GIL on big reads)."""
    todo = [f for f in files if _key(f) not in _MEMO]
    size = sum(f.stat().st_size for f in todo)
    if size > _ANNOUNCE_BYTES:
        print(
            f"hashing {what}: {len(todo)} files, {size / 2**30:.1f} GiB (once; recorded in the manifest)",
            file=sys.stderr,
            flush=True,
        )
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1, max(1, len(todo)))) as pool:
        list(pool.map(file_sha256, todo))
    return [file_sha256(f) for f in files]


def directory_identity(directory: str | os.PathLike, select: Callable[[Path], Iterable[Path]] = model_files) -> str:
    """``sha256:<16 hex>`` over the selected files' names and contents (not their paths or times)."""
    files = list(select(directory))
    h = hashlib.sha256()
    for f, digest in zip(files, _hash_all(files, str(directory))):
        h.update(f"{f.name}\0{digest}\n".encode())
    return "sha256:" + h.hexdigest()[:16]


def file_record(directory: str | os.PathLike) -> dict[str, list]:
    """``{file: [size, mtime_ns, sha256]}`` of a model directory (already hashed: no reads)."""
    out = {}
    for f in model_files(os.path.expanduser(directory)):
        _, size, mtime = _key(f)
        out[f.name] = [size, mtime, file_sha256(f)]
    return out


def remember(directory: str | os.PathLike, record: dict | None) -> None:
    """Seed the memo from a manifest's :func:`file_record`; a file whose size or mtime_ns
    changed since has another key and is read again."""
    root = Path(os.path.expanduser(directory))
    if not isinstance(record, dict) or not root.is_dir():
        return
    root = root.resolve()
    for name, entry in record.items():
        if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], str):
            _MEMO[(str(root / name), int(entry[0]), int(entry[1]))] = entry[2]


@functools.lru_cache(maxsize=64)
def hub_revision(repo_id: str, repo_type: str = "model", revision: str | None = None) -> str | None:
    """The commit SHA a Hub id (at ``revision``: a branch, tag or SHA; ``main`` when None) resolves
    to now: the Hub's answer when online, else the local cache's snapshot; None when neither knows it."""
    import huggingface_hub
    from huggingface_hub import HfApi, snapshot_download

    if not huggingface_hub.is_offline_mode():
        try:
            info = (HfApi().model_info if repo_type == "model" else HfApi().dataset_info)(
                repo_id, revision=revision, timeout=10
            )
            if info.sha:
                return info.sha
        except Exception:  # unknown id, no network, gated: the cache may still know it
            pass
    try:
        return Path(snapshot_download(repo_id, repo_type=repo_type, revision=revision, local_files_only=True)).name
    except Exception:
        return None


def model_identity(name: str, *, api: bool = False) -> str:
    """The identity of a model (or adapter) given as a directory, a Hub id or a served name.

    ``api``: the name is a model behind an OpenAI-compatible server, recorded as ``api:NAME``
    when it is neither a local directory nor a resolvable Hub id.
    """
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        return directory_identity(path)
    if path.is_file():  # a single-file checkpoint (GGUF)
        return "sha256:" + file_sha256(path)[:16]
    if looks_like_hub_id(name):
        sha = hub_revision(name, "model")
        if sha:
            return f"hub:{name}@{sha}"
    return f"api:{name}" if api else f"unresolved:{name}"


def clear_memo() -> None:
    """Forget every hash (tests: what a new process would know)."""
    _MEMO.clear()
    hub_revision.cache_clear()
