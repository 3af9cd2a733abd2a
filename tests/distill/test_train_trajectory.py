"""SFT on tool-use trajectories: loss on the model's turns only (tool-call text and final answer), never on
the prompt or a tool's observation, checked token by token on a real rendered trajectory; and a short real run."""

import json
import re
from statistics import mean

import pyarrow as pa
import pytest

from reasonkit.distill import data
from reasonkit.distill.config import TrainConfig
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.recipes.tasks import agent as agent_task
from reasonkit.schema import TOOL_MESSAGES
from reasonkit.store import StageWriter


def stored(messages):
    """Template-shape messages (agent_task.reference_messages) in the stored shape, as the tool loop stores them."""
    from reasonkit.gen.tools.calls import assistant_message, call_from, stored_messages, tool_message

    out = []
    for m in messages:
        if m["role"] == "assistant":
            calls = [call_from(c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []]
            out.append(assistant_message(m.get("content") or "", calls))
        elif m["role"] == "tool":
            out.append(tool_message(m["name"], m["content"]))
        else:
            out += stored_messages([m])
    return out


@pytest.fixture(scope="module")
def trajectories():
    """Eight reference trajectories of the agent task (two searches, then the year) with the real tools' observations
    (BM25 search over the task's corpus, the sandboxed python tool, called through ToolBox as the tool loop calls
    them),
    as stored rows; the first also runs a python check (calls with different argument names in one table)."""
    from reasonkit.gen.tools.base import ToolBox
    from reasonkit.gen.tools.python import make_python
    from reasonkit.gen.tools.search import make_search

    world = agent_task.make_world(seed=0, n_authors=40)
    box = ToolBox([make_search(agent_task.corpus(world), k=2), make_python()])
    search = lambda query: box.call("search", json.dumps({"query": query})).content  # noqa: E731
    rows = []
    for i, q in enumerate(agent_task.questions(world, "train")[:8]):
        messages = stored(agent_task.reference_messages(q, search))
        if i == 0:
            code = json.dumps({"code": f"print({q['answer']})"})
            messages[-1:-1] = [
                {
                    "role": "assistant",
                    "content": "Let me check the year.",
                    "tool_calls": [{"name": "python", "arguments": code}],
                    "name": None,
                },
                {"role": "tool", "content": box.call("python", code).content, "tool_calls": None, "name": "python"},
            ]
        rows.append(
            {
                "id": q["id"],
                "sample": 0,
                "messages": messages,
                "response": messages[-1]["content"],
                "turns": sum(m["role"] == "assistant" for m in messages),
                "tool_calls": sum(len(m["tool_calls"] or []) for m in messages),
                "tool_errors": 0,
                "finish_reason": "stop",
                "prompt_tokens": 100,
                "completion_tokens": 30,
                "teacher": "reference",
                "gen_config": "0",
                "answer": q["answer"],
                "source": agent_task.SOURCE,
                "tools": json.dumps(box.schemas()),
            }
        )
    assert rows[0]["messages"][-2]["content"] == rows[0]["answer"]  # the python tool really ran
    return pa.Table.from_pylist(rows)


@pytest.fixture(scope="module")
def tool_student(tmp_path_factory, trajectories):
    """A tiny random Llama under the tool-capable tokenizer (recipes/teachers/tiny_tools.py: TRL's Qwen2.5 template)."""  # noqa: E501
    from reasonkit.recipes.teachers.tiny import TinyLlama, build_model
    from reasonkit.recipes.teachers.tiny_tools import build_tool_tokenizer

    out = tmp_path_factory.mktemp("tool_student")
    texts = []
    for row in trajectories.to_pylist():
        messages, tools = data.chat_inputs(row)
        texts.append(_render(messages, tools))
    tok = build_tool_tokenizer(texts, out, vocab_size=600)
    build_model(
        tok,
        out,
        shape=TinyLlama(
            hidden_size=64, num_layers=2, num_heads=2, intermediate_size=256, max_position_embeddings=2048
        ),
    )
    return str(out)


def _render(messages, tools):
    from transformers.utils.chat_template_utils import render_jinja_template

    from reasonkit.recipes.teachers.tiny_tools import qwen2_5_template

    return render_jinja_template([messages], chat_template=qwen2_5_template(), tools=tools)[0][0]


def cfg(student, tmp_path, **kw):
    base = dict(
        method="sft",
        student=student,
        data=str(tmp_path / "sft"),
        out=str(tmp_path / "run"),
        lr=5e-3,
        batch_size=4,
        threads=1,
        save_steps=1000,
    )
    return TrainConfig(**{**base, **kw})


def trained_dataset(student, table, tmp_path):
    """TRL's processed training set, built by the path `distill train --method sft` takes."""
    from reasonkit.distill.sft import build_sft_trainer, sft_arguments
    from reasonkit.distill.student import load_model, resolve_device, trainer_args

    c = cfg(student, tmp_path)
    table = data.load_rows(table, "sft", "trajectories")
    tok = data.load_tokenizer(c)
    note = data.resolve_template(tok, c)
    device = resolve_device(c)
    args = sft_arguments(c, trainer_args(c, device, tmp_path / "ckpt", 2048))
    trainer = build_sft_trainer(c, load_model(c, device), tok, data.to_dataset(table, "sft"), args, None, [])
    return tok, note, table, trainer.train_dataset


def spans(text, start, end):
    """Character spans from each ``start`` (excluded) to the ``end`` after it (included)."""
    out = []
    for m in re.finditer(re.escape(start), text):
        stop = text.index(end, m.end()) + len(end)
        out.append((m.end(), stop))
    return out


def test_sft_mask_covers_the_models_turns_only(tool_student, trajectories, tmp_path):
    tok, note, table, dataset = trained_dataset(tool_student, trajectories, tmp_path)
    assert "TRL's marked version" in note  # the student's own template is TRL's qwen2_5.jinja, without markers
    assert data.sft_kind(table) == "sft_tools"
    for row, example in zip(table.to_pylist(), dataset):
        messages, tools = data.chat_inputs(row)
        text = _render(messages, tools)
        enc = tok(text, return_offsets_mapping=True, add_special_tokens=False)
        assert enc["input_ids"] == example["input_ids"]  # what TRL trains on is the rendered trajectory
        labels = example["labels"]
        assert len(labels) == len(enc["input_ids"])
        # An assistant turn: after "<|im_start|>assistant" up to its end token and newline; the rest is prompt,
        # tool preamble or tool observations (rendered in user blocks).
        assistant = spans(text, "<|im_start|>assistant", "<|im_end|>\n")
        responses = spans(text, "<tool_response>", "</tool_response>")
        # the calls the model made (the system preamble's format example is not one)
        calls = [
            (a, b)
            for a, b in spans(text, "<tool_call>", "</tool_call>")
            if any(s <= a and b <= e for s, e in assistant)
        ]
        assert (
            len(assistant) == sum(m["role"] == "assistant" for m in messages)
            and len(responses) >= 2
            and len(calls) >= 2
        )

        def inside(token, regions):
            a, b = enc["offset_mapping"][token]
            hit = [s <= a and b <= e for s, e in regions]
            overlap = [a < e and s < b for s, e in regions]
            assert hit == overlap, f"token {token} {text[a:b]!r} straddles a turn boundary"
            return any(hit)

        for t, (label, token_id) in enumerate(zip(labels, enc["input_ids"])):
            a, b = enc["offset_mapping"][t]
            piece = text[a:b]
            if inside(t, assistant):
                assert label == token_id, f"assistant token {t} {piece!r} not trained"
            else:
                assert label == -100, f"token {t} {piece!r} outside the assistant turns is trained"
            if inside(t, responses) or text[max(0, a - 20) : b].endswith("<tool_response>"):
                assert label == -100, f"tool observation token {t} {piece!r} trained"
        trained = "".join(text[a:b] for (a, b), label in zip(enc["offset_mapping"], labels) if label != -100)
        # the calls and the answer, end tokens included, are all the student learns to write
        for m in messages:
            if m["role"] == "assistant":
                assert (m["content"] or "") in trained
                for c in m.get("tool_calls") or []:
                    assert json.dumps(c["function"]["arguments"]) in trained
            elif (
                m["role"] in ("tool", "user") and len(m["content"]) > 8
            ):  # (the python tool's "1916" is also the answer)
                assert m["content"] not in trained
        assert trained.count("<tool_call>") == trained.count("</tool_call>") == len(calls)
        assert trained.count("<|im_end|>") == len(assistant) and "<tool_response>" not in trained
        assert (
            "# Tools" not in trained and "search" in text[: text.index("<|im_start|>user")]
        )  # tools shown, untrained


def test_tool_arguments_are_rendered_as_the_model_wrote_them(tool_student, trajectories, tmp_path):
    """A search call renders {"query": ...} only: Arrow would merge the python call's "code" into every call's arguments."""  # noqa: E501
    _, _, _, dataset = trained_dataset(tool_student, trajectories, tmp_path)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tool_student)
    text = tok.decode(dataset[0]["input_ids"])
    assert '"arguments": {"code": "print(' in text and '"code": null' not in text and '"query": null' not in text


def test_sft_on_filtered_trajectories_lowers_the_loss(tool_student, trajectories, tmp_path):
    from reasonkit.distill.train import train

    with StageWriter(tmp_path / "traj", stage="generate", kind="trajectories", config={}, keys=("id", "sample")) as w:
        w.commit(trajectories)
        w.finish()
    report = run_filter(
        FilterConfig(traces=str(tmp_path / "traj"), out=str(tmp_path / "filtered"), workers=1, require_tool=True)
    )
    assert report["rows_out"] == 8  # the language filter reads the prose, not the fictional names in the calls
    result = train(cfg(tool_student, tmp_path, data=str(tmp_path / "filtered" / "sft"), max_steps=16))
    losses = [r["loss"] for r in result["history"]]
    assert result["steps"] == 16 and result["lint"] == []
    assert mean(losses[-3:]) < mean(losses[:3]) - 0.5, losses


def test_lint_flags_tool_conversations_without_tool_schemas(tool_student, trajectories, tmp_path):
    from reasonkit.distill.train import train
    from reasonkit.errors import UserError

    bare = trajectories.drop_columns(["tools"])
    bare.to_pandas().to_json(tmp_path / "bare.jsonl", orient="records", lines=True)
    with pytest.raises(
        UserError, match=r"lint \(no_tool_schemas\): 8 of 8 examples call tools but carry no tool schemas"
    ):
        train(cfg(tool_student, tmp_path, data=str(tmp_path / "bare.jsonl"), max_steps=1))


def test_a_trajectories_table_keeps_its_calls():
    """Read as plain sft, the turns' tool_calls would be cast away without a word (the defect this guards)."""
    table = pa.table(
        {
            "id": ["a"],
            "messages": pa.array(
                [
                    [
                        {"role": "user", "content": "q", "tool_calls": None, "name": None},
                        {
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [{"name": "search", "arguments": '{"query": "x"}'}],
                            "name": None,
                        },
                        {"role": "tool", "content": "found", "tool_calls": None, "name": "search"},
                        {"role": "assistant", "content": "1987", "tool_calls": None, "name": None},
                    ]
                ],
                TOOL_MESSAGES,
            ),
        }
    )
    loaded = data.load_rows(table, "sft", "t.parquet")
    assert loaded.schema.field("messages").type == TOOL_MESSAGES
    messages, tools = data.chat_inputs(loaded.to_pylist()[0])
    assert messages[1]["tool_calls"] == [
        {"type": "function", "function": {"name": "search", "arguments": {"query": "x"}}}
    ]
    assert messages[2] == {"role": "tool", "content": "found", "name": "search"} and tools is None
