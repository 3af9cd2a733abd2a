"""`distill push` refuses a table holding a credential-shaped string, naming table, column and rows:
the last line of defence when a model's program (or a teacher) wrote a token into a row."""

import json
import secrets

import pyarrow as pa
import pytest
from click.testing import CliRunner

from reasonkit import cli as cli_module
from reasonkit.hub.secrets import find_secrets

from ..helpers.synthetic import trace, write_traces

HF = "hf_" + secrets.token_hex(17)  # 34 characters after hf_, as Hugging Face issues them
AWS = "AKIA" + "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    "text,kind",
    [
        (f"The tool printed {HF}\n", "Hugging Face token"),
        ("key = sk-ant-api03-" + "A" * 40, "OpenAI/Anthropic-style key"),
        ("OPENAI_API_KEY=sk-proj-" + "x1" * 24, "OpenAI/Anthropic-style key"),
        (f"aws_access_key_id = {AWS}", "AWS Access Key"),
        (PEM, "Private Key"),
        ("ghp_" + "a" * 36, "GitHub Token"),
    ],
)
def test_each_kind_is_found(text, kind):
    found = find_secrets({"default": pa.table({"id": ["p1"], "response": [text]})})
    assert [(f.table, f.column, f.ids) for f in found] == [("default", "response", ["p1"])]
    assert kind in found[0].kinds


@pytest.mark.parametrize(
    "text",
    [
        "from huggingface_hub import hf_hub_download",
        "import sklearn as sk-learn",
        "the answer is \\boxed{42}",
        "hf_" + "a" * 20,
        "sk-" + "a" * 10,
        "AKIA is a prefix",
        "BEGIN PUBLIC KEY",
    ],
)
def test_ordinary_text_is_not_a_secret(text):
    assert find_secrets({"default": pa.table({"id": ["p1"], "response": [text]})}) == []


def test_nested_message_contents_are_scanned_and_rows_named():
    messages = pa.array(
        [
            [{"role": "user", "content": "hi"}],
            [{"role": "tool", "content": f"token: {HF}"}],
            [{"role": "assistant", "content": HF}],
        ]
    )
    table = pa.table({"id": ["a", "b", "c"], "sample": pa.array([0, 1, 2], pa.int32()), "messages": messages})
    (finding,) = find_secrets({"sft": table})
    assert (finding.table, finding.column, finding.ids, finding.rows) == ("sft", "messages.content", ["b#1", "c#2"], 2)


def push(*args):
    return CliRunner().invoke(cli_module.cli, ["push", *map(str, args)])


def test_push_of_a_table_with_a_planted_token_is_refused_row_named(tmp_path):
    rows = [
        trace("p1", 0, problem="2+2?", reasoning="4", response="\\boxed{4}", answer="4"),
        trace("p2", 3, problem="Run it.", reasoning="ok", response=f"The program printed {HF}.", answer="1"),
    ]
    write_traces(tmp_path / "traces", rows)
    preview = tmp_path / "preview"
    result = push(tmp_path / "traces", "--repo", "org/leak", "--dry-run", preview)
    assert result.exit_code == 2, result.output
    message = result.output.strip()
    assert "refusing to publish" in message and "column 'response'" in message and "p2#3" in message
    assert "table 'default'" in message and HF not in message and "p1#0" not in message
    assert not preview.exists() or not any(preview.iterdir())  # nothing written
    allowed = push(tmp_path / "traces", "--repo", "org/leak", "--dry-run", preview, "--allow-secrets")
    assert allowed.exit_code == 0, allowed.output


def test_the_card_says_how_model_programs_ran(tmp_path):
    write_traces(
        tmp_path / "traces", [trace("p1", 0, problem="2+2?", reasoning="4", response="\\boxed{4}", answer="4")]
    )
    manifest_path = tmp_path / "traces" / "_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "sandbox": "none"}))
    assert push(tmp_path / "traces", "--repo", "org/card", "--dry-run", tmp_path / "preview").exit_code == 0
    card = (tmp_path / "preview" / "README.md").read_text()
    assert "### Sandbox" in card and "`none` (no namespaces: NOT isolated)" in card
