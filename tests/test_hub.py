"""`distill push`: the dry-run repository loads with `datasets`; the upload reaches a loopback Hub intact.

The stage directories are built with StageWriter from literal rows: a generate stage (traces) that
read a prompts file, and a filter stage (verdicts) over it with `rejected/`, `sft/` and a report,
linked by `input_path` in their manifests as the stages record it.
"""

import base64
import json
import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner

from reasonkit import __version__
from reasonkit import cli as cli_module
from reasonkit.errors import UserError
from reasonkit.hub import push
from reasonkit.store import StageWriter, fingerprint, fingerprint_path

TOKEN = "hf_reasonkitTESTtoken0123456789abcdef"
TEACHER = "reasonkit/tiny-teacher"
# As gen/stage.py records it: `config` is what decides the rows, `run_config` where it ran.
GEN_CONFIG = {"teacher": TEACHER, "backend": "openai", "n": 2, "temperature": 0.6, "top_p": 0.95, "max_tokens": 256, "seed": 0}
PRIVATE_URL = "http://10.1.2.3:8000/v1"
GEN_FP = fingerprint(GEN_CONFIG)
FILTER_CONFIG = {"verifier": "math", "lang": "en", "dedup": "exact", "decontam": ["evals/aime24.parquet"]}
REPORT = {
    "funnel": {"in": 8, "dropped": {"wrong_answer": 2, "decontam:aime24": 1}, "out": 5},
    "decontamination": {"aime24": 1},
}
RECIPE = "# distill run recipe.yaml\ngenerate:\n  n: 2\nfilter:\n  verifier: math\n"


def _traces(ids: list[str], sample: int = 0, correct: bool | None = None) -> pa.Table:
    n = len(ids)
    cols = {
        "id": ids,
        "sample": pa.array([sample] * n, pa.int32()),
        "messages": [[{"role": "user", "content": f"What is {i}+1? Put the answer in \\boxed{{}}."}] for i in range(n)],
        "completion": ["<think>add one</think>\\boxed{2}"] * n,
        "reasoning": ["add one"] * n,
        "response": ["\\boxed{2}"] * n,
        "finish_reason": ["stop"] * n,
        "prompt_tokens": pa.array([12] * n, pa.int32()),
        "completion_tokens": pa.array([7] * n, pa.int32()),
        "teacher": [TEACHER] * n,
        "gen_config": [GEN_FP] * n,
        "answer": ["2"] * n,
        "source": ["synthetic"] * n,
    }
    return pa.table(cols)


def _verdicts(ids: list[str], keep: bool) -> pa.Table:
    t = _traces(ids)
    n = len(ids)
    return (
        t.append_column("pred", pa.array(["2"] * n))
        .append_column("correct", pa.array([keep] * n))
        .append_column("lang_ratio", pa.array([1.0] * n, pa.float32()))
        .append_column("keep", pa.array([keep] * n))
        .append_column("drop_reason", pa.array([None if keep else "wrong_answer"] * n, pa.string()))
    )


@pytest.fixture
def stages(tmp_path) -> Path:
    """runs/filtered (verdicts, 2 shards, rejected/, sft/, report.json) <- runs/traces <- prompts.jsonl."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "p0", "problem": "1+1"}\n')
    gen = tmp_path / "runs" / "traces"
    with StageWriter(gen, stage="generate", kind="traces", config=GEN_CONFIG, keys=("id", "sample"),
                     input_fingerprint=fingerprint_path(prompts)) as w:
        w.commit(_traces([f"p{i}" for i in range(4)]))
        w.finish(run_config={"prompts": str(prompts), "out": str(gen), "base_url": PRIVATE_URL, "api_key_env": "OPENAI_API_KEY"},
                 backend_info={"backend": "openai", "openai": "1.99.0", "base_url": PRIVATE_URL}, gen_config=GEN_FP)
    out = tmp_path / "runs" / "filtered"
    with StageWriter(out, stage="filter", kind="verdicts", config=FILTER_CONFIG, keys=("id", "sample"),
                     input_fingerprint=fingerprint_path(gen)) as w:
        w.commit(_verdicts(["p0", "p1"], keep=True))
        w.commit(_verdicts(["p2"], keep=True))
        w.finish(input_path="runs/traces", versions={"math_verify": "0.8.0", "lingua": "2.1.0"})
    with StageWriter(out / "rejected", stage="filter", kind="verdicts", config=FILTER_CONFIG, keys=("id", "sample")) as w:
        w.commit(_verdicts(["p3"], keep=False))
        w.finish()
    with StageWriter(out / "sft", stage="filter", kind="sft", config=FILTER_CONFIG, keys=("id",)) as w:
        w.commit(pa.table({"id": ["p0", "p1", "p2"],
                           "messages": [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]] * 3,
                           "source": ["synthetic"] * 3}))
        w.finish()
    (out / "report.json").write_text(json.dumps(REPORT))
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _card_meta(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


@pytest.fixture
def distill(monkeypatch):
    """The `distill` group with `push` wired to this module (as cli.py will map it)."""
    monkeypatch.setitem(cli_module.COMMANDS, "push", ("reasonkit.hub:push_command", "Publish a stage directory."))
    return lambda *args: CliRunner().invoke(cli_module.cli, ["push", *map(str, args)])


# -- dry run ----------------------------------------------------------------------------------------


def test_dry_run_folder_loads_every_config_with_datasets(stages, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the filter recorded input_path relative to this directory
    folder = tmp_path / "preview"
    result = push(stages, "org/r1-distill-tiny", dry_run=folder, license="apache-2.0", recipe=_recipe(tmp_path))
    assert result["configs"] == {"default": 3, "rejected": 1, "sft": 3}
    assert result["url"] is None and result["commit"] is None

    files = _files(folder)
    assert sorted(files) == [
        "README.md", "data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet",
        "provenance.json", "rejected/train-00000-of-00001.parquet", "sft/train-00000-of-00001.parquet",
    ] == sorted(result["files"])
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
        {"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*.parquet"}], "default": True},
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
    assert "| rows in | | 8 |" in body and "| `wrong_answer` | 2 | 6 |" in body and "| rows out | | 5 |" in body
    # decontamination: what was checked and what it found
    assert "`evals/aime24.parquet`" in body and "| `aime24` | `1` |" in body
    assert "| math_verify | `0.8.0` |" in body and "| lingua | `2.1.0` |" in body
    assert "| source | `.../" in body and "/prompts.jsonl` |" in body  # the lineage reaches the prompts file
    # no machine-specific path is published (the generate stage recorded an absolute input_path)
    published = card + (folder / "provenance.json").read_text()
    assert str(tmp_path) not in published and PRIVATE_URL not in published
    assert f"reasonkit {__version__}" in body
    assert RECIPE.strip() in body
    prov = json.loads((folder / "provenance.json").read_text())
    assert [l["manifest"]["stage"] if l["manifest"] else "source" for l in prov["lineage"]] == ["filter", "generate", "source"]
    assert prov["configs"]["rejected"]["files"] == ["rejected/train-00000-of-00001.parquet"]


def test_unreachable_input_is_said_not_guessed(stages, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "traces").rename(tmp_path / "archived-traces")  # gone from where it was recorded
    push(stages, "org/x", dry_run=tmp_path / "preview")
    card = (tmp_path / "preview" / "README.md").read_text()
    assert "input `runs/traces` is not reachable from here" in card
    assert "No `generate` manifest is reachable" in card
    assert f"| `{TEACHER}` |" in card  # still counted from the rows themselves


def test_changed_input_is_not_trusted(stages, tmp_path, monkeypatch):
    from reasonkit.hub_provenance import lineage
    from reasonkit.store import load_manifest

    monkeypatch.chdir(tmp_path)
    with StageWriter(tmp_path / "runs" / "traces", stage="generate", kind="traces", config=GEN_CONFIG,
                     keys=("id", "sample"), input_fingerprint=fingerprint_path(tmp_path / "prompts.jsonl")) as w:
        w.commit(_traces(["p9"]))  # the traces grew after the filter read them
        w.finish()
    chain = lineage(stages, load_manifest(stages))
    assert len(chain) == 1
    assert chain[0].notes == ["input `runs/traces` has changed since this stage read it; provenance stops at this stage"]


def test_hub_dataset_source(tmp_path):
    from reasonkit.hub_provenance import lineage
    from reasonkit.store import load_manifest

    with StageWriter(tmp_path / "gen", stage="generate", kind="traces", config=GEN_CONFIG, keys=("id", "sample"),
                     input_fingerprint=fingerprint_path("AI-MO/aimo-validation-aime")) as w:
        w.commit(_traces(["p0"]))
        w.finish(run_config={"prompts": "AI-MO/aimo-validation-aime"})
    chain = lineage(tmp_path / "gen", load_manifest(tmp_path / "gen"))
    assert [l.source for l in chain] == [None, "AI-MO/aimo-validation-aime"] and chain[0].notes == []


def test_empty_and_untyped_substages_are_listed_not_published(stages, tmp_path):
    with StageWriter(stages / "extra", stage="filter", kind="sft", config={}, keys=("id",)) as w:
        w.finish()
    # a judge-style work log: no table kind, rows of its own shape, never finished
    StageWriter(stages / "record", stage="judge-record", kind=None, config={}, keys=("id",)).commit(pa.table({"id": ["a"]}))
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
    for name, data in _files(folder).items():
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
    probe = ("import sys, reasonkit.hub; print([m for m in ('huggingface_hub', 'datasets', 'pyarrow', 'yaml') "
             "if m in sys.modules])")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "[]"


# -- bad input: one error, exit 2, nothing written ------------------------------------------------


@pytest.mark.parametrize("repo", ["noslash", "a/b/c", "org/na me", "org/x--y", "org/x.git", "-org/x", "org/", ""])
def test_bad_repo_id(stages, tmp_path, distill, repo):
    result = distill(stages, "--repo", repo, "--dry-run", tmp_path / "preview")
    assert result.exit_code == 2 and result.output.startswith("error: --repo"), result.output
    assert not (tmp_path / "preview").exists()


def test_incomplete_directory(tmp_path, distill):
    w = StageWriter(tmp_path / "partial", stage="generate", kind="traces", config=GEN_CONFIG, keys=("id", "sample"))
    w.commit(_traces(["p0"]))  # never finished
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
    assert _files(tmp_path / "preview") == {"keep.txt": b"mine"}


def test_missing_token(stages, tmp_path, monkeypatch, distill):
    import huggingface_hub.constants

    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    result = distill(stages, "--repo", "org/x")
    assert result.exit_code == 2 and result.output.startswith("error: no Hugging Face token"), result.output


# -- upload against a recording loopback Hub --------------------------------------------------------


class _Hub(BaseHTTPRequestHandler):
    """Just enough of the Hub API for `create_repo`, `list_repo_files` and `create_commit`."""

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _reply(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self, body: bytes) -> None:
        self.server.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body})

    def do_GET(self):
        self._record(b"")
        path = urlparse(self.path).path
        if path == f"/api/datasets/{self.server.repo}/tree/main":
            self._reply(200, [{"type": "file", "path": p, "size": len(d), "oid": "0" * 40} for p, d in self.server.files.items()])
        else:
            self._reply(404, {"error": f"not here: {path}"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._record(body)
        path, repo = urlparse(self.path).path, self.server.repo
        if self.server.fail_with:
            self._reply(self.server.fail_with, {"error": "Invalid credentials in Authorization header"})
        elif path == "/api/repos/create":
            self._reply(200, {"url": f"http://{self.headers['Host']}/datasets/{repo}", "name": repo})
        elif path == "/api/validate-yaml":
            yaml.safe_load(json.loads(body)["content"].split("---\n")[1])  # the card's metadata parses
            self._reply(200, {"errors": [], "warnings": []})
        elif path == f"/api/datasets/{repo}/preupload/main":
            files = json.loads(body)["files"]
            self._reply(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None} for f in files]})
        elif path == f"/api/datasets/{repo}/commit/main":
            for line in body.splitlines():
                op = json.loads(line)
                if op["key"] == "file":
                    self.server.files[op["value"]["path"]] = base64.b64decode(op["value"]["content"])
                elif op["key"] == "deletedFile":
                    self.server.files.pop(op["value"]["path"])
                elif op["key"] != "header":
                    raise AssertionError(f"unexpected commit operation {op['key']}")
            self._reply(200, {"commitUrl": f"http://{self.headers['Host']}/datasets/{repo}/commit/{'c' * 40}", "commitOid": "c" * 40})
        else:
            self._reply(404, {"error": f"not here: {path}"})


@pytest.fixture
def hub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    server.repo, server.requests, server.fail_with = "org/r1-distill-tiny", [], None
    server.files = {".gitattributes": b"*.parquet filter=lfs\n", "data/train-00000-of-00009.parquet": b"stale"}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _distill_subprocess(args: list, hub, tmp_path: Path, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    """`distill push` in a fresh interpreter: huggingface_hub reads HF_ENDPOINT and offline mode at import."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN")}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{hub.server_address[1]}", HF_HOME=str(tmp_path / "hf-home"),
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", HF_HUB_DISABLE_TELEMETRY="1")
    if token:
        env["HF_TOKEN"] = token
    runner = textwrap.dedent("""
        from reasonkit import cli
        cli.COMMANDS["push"] = ("reasonkit.hub:push_command", "Publish a stage directory.")
        cli.main()
    """)
    return subprocess.run([sys.executable, "-c", runner, "push", *map(str, args)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_upload_reaches_the_hub_intact(stages, tmp_path, hub):
    preview = tmp_path / "preview"
    out = _distill_subprocess([stages, "--repo", "org/r1-distill-tiny", "--private", "--dry-run", preview], hub, tmp_path)
    assert out.returncode == 0, out.stderr
    assert hub.requests == []  # a dry run makes no request at all

    out = _distill_subprocess([stages, "--repo", "org/r1-distill-tiny", "--private"], hub, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "pushed 6 files to http://127.0.0.1" in out.stdout and "removed 1 stale shard(s)" in out.stdout
    assert TOKEN not in out.stdout + out.stderr

    calls = [(r["method"], urlparse(r["path"]).path) for r in hub.requests]
    assert calls == [
        ("POST", "/api/repos/create"),
        ("GET", "/api/datasets/org/r1-distill-tiny/tree/main"),
        ("POST", "/api/validate-yaml"),
        ("POST", "/api/datasets/org/r1-distill-tiny/preupload/main"),
        ("POST", "/api/datasets/org/r1-distill-tiny/commit/main"),
    ]
    assert json.loads(hub.requests[0]["body"]) == {"name": "r1-distill-tiny", "organization": "org",
                                                   "visibility": "private", "type": "dataset"}
    assert all(r["headers"].get("authorization") == f"Bearer {TOKEN}" for r in hub.requests)
    # Exactly the dry-run repository arrived (card, provenance, shards byte for byte), the stale
    # shard from an earlier push is gone and files that are not shards are left alone.
    assert hub.files == {".gitattributes": b"*.parquet filter=lfs\n", **_files(preview)}
    header = json.loads(hub.requests[-1]["body"].splitlines()[0])["value"]
    assert header["summary"] == "reasonkit push: filter (7 rows)"


def test_hub_refusal_is_one_line_without_token(stages, tmp_path, hub):
    hub.fail_with = 401
    out = _distill_subprocess([stages, "--repo", "org/r1-distill-tiny"], hub, tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr == ("error: push to org/r1-distill-tiny failed: HTTP 401 Unauthorized: Invalid credentials in "
                          "Authorization header; check that the token may write to this namespace\n")
    assert TOKEN not in out.stdout + out.stderr
    paths = [urlparse(r["path"]).path for r in hub.requests]
    assert paths[0] == "/api/repos/create" and not any("/preupload/" in p or "/commit/" in p for p in paths)


def test_missing_token_uploads_nothing(stages, tmp_path, hub):
    out = _distill_subprocess([stages, "--repo", "org/r1-distill-tiny"], hub, tmp_path, token=None)
    assert out.returncode == 2 and out.stderr.startswith("error: no Hugging Face token")
    assert hub.requests == []
