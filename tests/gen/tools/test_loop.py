"""The multi-turn tool loop's logic, with a scripted backend (fine for logic: the real backends are in
tests/gen/tools/test_loop_real.py), the tool-call parser on literal strings, and `distill generate --tools`
as a stage: its table, its resume, its bad input."""

import json
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from reasonkit.gen.backend import Request, Sampling
from reasonkit.gen.tools import base
from reasonkit.gen.tools.base import ToolBox
from reasonkit.gen.tools.calls import openai_messages, parse_turn, template_messages
from reasonkit.gen.tools.loop import rollouts
from reasonkit.schema import schema

from ...helpers.gen_tools import ScriptedBackend, call_text, lookup_script, make_echo, make_slow


# -- parsing ------------------------------------------------------------------------------------
def test_parse_keeps_the_text_before_the_calls_and_every_call_in_order():
    text = (
        'I will search twice.\n<tool_call>\n{"name": "search", "arguments": {"query": "Vell Orrin"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "python", "arguments": {"code": "print({1: 2})"}}\n</tool_call>'
    )
    turn = parse_turn(text)
    assert turn.content == "I will search twice."
    assert [(c.name, json.loads(c.arguments), c.error) for c in turn.calls] == [
        ("search", {"query": "Vell Orrin"}, None),
        ("python", {"code": "print({1: 2})"}, None),
    ]


@pytest.mark.parametrize(
    "text, name, error",
    [
        ('<tool_call>\n{"name": "search", "arguments": {"query": }\n</tool_call>', "search", "not valid JSON"),
        ('<tool_call>\n{"name": "search", "arguments": [1, 2]}\n</tool_call>', "search", "not a JSON object"),
        ('<tool_call>\n{"arguments": {}}\n</tool_call>', "", 'expected {"name"'),
        ("<tool_call>\n</tool_call>", "", "not valid JSON"),
        ('<tool_call>\n{"name": "search", "arguments": {"query": "cut off', "search", "not valid JSON"),
    ],
)
def test_a_malformed_call_is_kept_with_its_error(text, name, error):
    [call] = parse_turn(text).calls
    assert call.name == name and error in call.error


def test_the_three_shapes_of_a_conversation():
    stored = [
        {"role": "user", "content": "q", "tool_calls": None, "name": None},
        {
            "role": "assistant",
            "content": "",
            "name": None,
            "tool_calls": [{"name": "a", "arguments": '{"x": 1}'}, {"name": "b", "arguments": "{}"}],
        },
        {"role": "tool", "content": "1", "tool_calls": None, "name": "a"},
        {"role": "tool", "content": "2", "tool_calls": None, "name": "b"},
    ]
    template = template_messages(stored)
    assert template[0] == {"role": "user", "content": "q"}
    assert template[1]["tool_calls"][0] == {"type": "function", "function": {"name": "a", "arguments": {"x": 1}}}
    api = openai_messages(stored)
    ids = [c["id"] for c in api[1]["tool_calls"]]
    assert len(set(ids)) == 2 and [m["tool_call_id"] for m in api[2:]] == ids
    assert api[1]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'  # the API takes JSON text


def test_the_qwen_template_renders_stored_calls_as_the_model_wrote_them(tmp_path):
    from reasonkit.gen.render import prompt_text
    from reasonkit.recipes.teachers.tiny_tools import build_tool_tokenizer

    tok = build_tool_tokenizer(["search 1987"], tmp_path, vocab_size=300)
    box = ToolBox([make_echo()])
    call = call_text("echo", text="hi")
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "echo", "arguments": '{"text": "hi"}'}]},
        {"role": "tool", "name": "echo", "content": "HI"},
    ]
    text = prompt_text(tok, messages, tools=box.schemas())
    assert call in text and "<tool_response>\nHI\n</tool_response>" in text and '"name": "echo"' in text
    assert parse_turn(text[text.index(call) :]).calls[0].arguments == '{"text": "hi"}'


# -- the loop -----------------------------------------------------------------------------------
def prompts(n, samples=1, seed=0):
    return [
        Request(f"q{i}", [{"role": "user", "content": f"word{i}"}], samples, Sampling(seed=seed + i)) for i in range(n)
    ]


def run(script, box, reqs, **kw):
    backend = ScriptedBackend(script, batch=kw.pop("batch", 4))
    out = {(t.id, t.sample): t for t in rollouts(backend, reqs, box, max_turns=kw.pop("max_turns", 4), **kw)}
    return out, backend


def test_a_call_then_an_answer():
    out, backend = run(lookup_script, ToolBox([make_echo()]), prompts(3))
    t = out[("q1", 0)]
    assert (t.finish_reason, t.turns, t.tool_calls, t.tool_errors) == ("stop", 2, 1, 0)
    assert t.response == "The answer is WORD1."
    assert [(m["role"], m["name"]) for m in t.messages] == [
        ("user", None),
        ("assistant", None),
        ("tool", "echo"),
        ("assistant", None),
    ]
    assert t.messages[1]["content"] == "Let me check." and t.messages[1]["tool_calls"] == [
        {"name": "echo", "arguments": '{"text": "word1"}'}
    ]
    assert t.messages[2]["content"] == "WORD1" and t.messages[3]["tool_calls"] is None
    assert (t.prompt_tokens, t.completion_tokens) == (10 + 30, 10)  # summed over the two turns
    assert all(r.tools and r.tools[0]["function"]["name"] == "echo" for r in backend.requests)


def test_a_model_that_never_stops_calling_ends_at_max_turns_without_running_the_last_calls():
    calls = []

    def forever(messages, request):
        calls.append(1)
        return call_text("echo", text="again"), "stop"

    out, _ = run(forever, ToolBox([make_echo()]), prompts(2), max_turns=3)
    t = out[("q0", 0)]
    assert (t.finish_reason, t.turns, t.tool_calls, t.response) == ("max_turns", 3, 2, "")
    assert [m["role"] for m in t.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert len(calls) == 6  # 3 turns each, no 4th


def test_one_turn_allowed_means_no_tool_ever_runs():
    out, _ = run(lambda m, r: (call_text("echo", text="x"), "stop"), ToolBox([make_echo()]), prompts(1), max_turns=1)
    assert (out[("q0", 0)].finish_reason, out[("q0", 0)].tool_calls) == ("max_turns", 0)


@pytest.mark.parametrize(
    "bad, kind",
    [
        ('<tool_call>\n{"name": "echo", "arguments": {"text": \n</tool_call>', "bad tool call: not valid JSON"),
        (call_text("echo", words="x"), "bad arguments for echo"),
        (call_text("mul", a=1), "unknown tool 'mul'"),
        (call_text("echo", text="boom"), "echo failed: RuntimeError: the echo broke"),
    ],
)
def test_tool_errors_are_observations_the_model_reads_and_recovers_from(bad, kind):
    def script(messages, request):
        if messages[-1]["role"] == "user":
            return bad, "stop"
        if messages[-1]["content"].startswith("error"):  # read the error: call again, properly
            return call_text("echo", text="fixed"), "stop"
        return f"answer {messages[-1]['content']}", "stop"

    out, _ = run(script, ToolBox([make_echo()]), prompts(1))
    t = out[("q0", 0)]
    assert (t.finish_reason, t.response, t.tool_calls, t.tool_errors, t.turns) == ("stop", "answer FIXED", 2, 1, 3)
    assert kind in t.messages[2]["content"] and t.messages[2]["role"] == "tool"


def test_length_and_backend_errors_end_a_trajectory():
    def script(messages, request):
        if request.id.endswith("0") or messages[0]["content"] == "word0":
            return "and so on and so", "length"
        if messages[0]["content"] == "word1":
            return "", "error"
        return lookup_script(messages, request)

    out, _ = run(script, ToolBox([make_echo()]), prompts(3))
    assert (out[("q0", 0)].finish_reason, out[("q0", 0)].response) == ("length", "and so on and so")
    assert (out[("q1", 0)].finish_reason, out[("q1", 0)].response, out[("q1", 0)].turns) == ("error", "", 1)
    assert [m["role"] for m in out[("q1", 0)].messages] == ["user"]
    assert out[("q2", 0)].finish_reason == "stop"


def test_several_calls_in_a_turn_come_back_in_order():
    def script(messages, request):
        if messages[-1]["role"] == "user":
            return call_text("echo", text="a") + "\n" + call_text("echo", text="b"), "stop"
        return "done", "stop"

    t = run(script, ToolBox([make_echo()]), prompts(1))[0][("q0", 0)]
    assert [(m["name"], m["content"]) for m in t.messages[2:4]] == [("echo", "A"), ("echo", "B")]
    assert t.tool_calls == 2 and t.messages[4]["role"] == "assistant"


def test_each_sample_and_turn_has_its_own_seed_and_reruns_draw_the_same():
    out, backend = run(lookup_script, ToolBox([make_echo()]), prompts(2, samples=3))
    assert sorted(out) == [(f"q{i}", k) for i in range(2) for k in range(3)]
    seeds = [r.sampling.seed for r in backend.requests]
    assert len(seeds) == 12 and len(set(seeds)) == 12  # 2 prompts x 3 samples x 2 turns
    _, again = run(lookup_script, ToolBox([make_echo()]), prompts(2, samples=3), batch=1)
    assert sorted(seeds) == sorted(r.sampling.seed for r in again.requests)


def test_tool_calls_of_different_trajectories_run_at_once_while_others_generate():
    slow = make_slow(0.2)

    def script(messages, request):
        tools = sum(m["role"] == "tool" for m in messages)
        return (call_text("slow", text=str(tools)) if tools < 2 else "done"), "stop"

    started = time.monotonic()
    out, _ = run(script, ToolBox([slow]), prompts(8), workers=8, batch=8)
    elapsed = time.monotonic() - started
    assert all(t.finish_reason == "stop" and t.tool_calls == 2 for t in out.values())
    assert slow.running["most"] >= 4  # calls of several trajectories overlapped
    assert elapsed < 8 * 2 * 0.2 / 2, elapsed  # a sequential loop needs 3.2 s


def test_window_bounds_the_trajectories_alive():
    seen, finished, most = set(), set(), []

    def script(messages, request):
        seen.add(request.id)  # the loop's key: the k-th trajectory started
        most.append(len(seen - finished))
        return lookup_script(messages, request)

    backend = ScriptedBackend(script, batch=16)
    out = {}
    for t in rollouts(backend, prompts(10, samples=2), ToolBox([make_echo()]), max_turns=4, window=4):
        out[(t.id, t.sample)] = t
        finished.add(str(2 * int(t.id[1:]) + t.sample))
    assert len(out) == 20 and 4 <= max(most) <= 4 + 1  # a prompt's samples start together: n - 1 over at most
    first_turns = [int(r.id) for r in backend.requests if len(r.messages) == 1]
    assert first_turns == sorted(first_turns)  # started in request order: the stage's shards complete in order


# -- the stage ----------------------------------------------------------------------------------
@pytest.fixture
def echo_tool(monkeypatch):
    """`--tools echo`: a test tool registered as the shipped ones are."""
    monkeypatch.setitem(base._FACTORIES, "echo", f"{make_echo.__module__}:make_echo")


def write_questions(path, n=7):
    pq.write_table(
        pa.table(
            {
                "id": [f"p{i}" for i in range(n)],
                "problem": [f"word{i}" for i in range(n)],
                "answer": [f"WORD{i}" for i in range(n)],
                "topic": ["t"] * n,
            }
        ),
        path,
    )
    return str(path)


def tool_config(tmp_path, **kw):
    from reasonkit.gen.run import GenerateConfig

    base_kw = dict(
        prompts=write_questions(tmp_path / "q.parquet"),
        teacher="fake-teacher",
        out=str(tmp_path / "out"),
        n=2,
        shard_size=3,
        tools="echo",
        max_turns=4,
        instruction="",
    )
    return GenerateConfig(**{**base_kw, **kw})


def test_stage_writes_trajectories_in_the_contract(tmp_path, echo_tool):
    from reasonkit.gen.run import generate
    from reasonkit.store import read_stage

    cfg = tool_config(tmp_path)
    manifest = generate(cfg, backend=ScriptedBackend(lookup_script))
    assert manifest["complete"] and manifest["rows"] == 14 and len(manifest["shards"]) == 3
    assert manifest["kind"] == "trajectories" and manifest["config"]["tools"] == ["echo"]
    t = read_stage(cfg.out, kind="trajectories")
    assert t.schema.field("messages").type == schema("trajectories").field("messages").type
    row = t.filter(pa.compute.equal(t["id"], "p3")).to_pylist()[0]
    assert row["response"] == "The answer is WORD3." and row["answer"] == "WORD3" and row["topic"] == "t"
    assert (row["turns"], row["tool_calls"], row["tool_errors"], row["finish_reason"]) == (2, 1, 0, "stop")
    assert row["messages"][1]["tool_calls"] == [{"name": "echo", "arguments": '{"text": "word3"}'}]
    assert row["messages"][2] == {"role": "tool", "content": "WORD3", "tool_calls": None, "name": "echo"}
    assert manifest["summary"]["completion_tokens"] == 14 * 10
    # the tool settings are part of what the rows say: another turn limit is another config
    from reasonkit.gen.run import generate as again

    with pytest.raises(Exception, match="overwrite"):
        again(tool_config(tmp_path, max_turns=5), backend=ScriptedBackend(lookup_script))


def test_stage_crash_then_rerun_loses_and_repeats_nothing(tmp_path, echo_tool):
    from reasonkit.gen.run import generate
    from reasonkit.store import load_manifest, read_stage

    cfg = tool_config(tmp_path)
    turns = {"count": 0}

    def crashing(messages, request):
        turns["count"] += 1
        if turns["count"] > 16:
            raise RuntimeError("simulated crash")
        return lookup_script(messages, request)

    with pytest.raises(RuntimeError, match="simulated crash"):
        generate(cfg, backend=ScriptedBackend(crashing, batch=2))
    partial = load_manifest(cfg.out)
    assert not partial["complete"] and 0 < partial["rows"] < 14
    resumed = ScriptedBackend(lookup_script)
    generate(cfg, backend=resumed)
    t = read_stage(cfg.out, kind="trajectories")
    keys = list(zip(t["id"].to_pylist(), t["sample"].to_pylist()))
    assert len(keys) == len(set(keys)) == 14
    assert all(r.messages[0]["content"] not in ("word0",) for r in resumed.requests)  # the committed shard is skipped


def distill(args):
    from reasonkit.cli import cli

    return CliRunner().invoke(cli, ["generate", *args])


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--tools", "search,calculator", "--corpus", "c.jsonl"], "unknown tool 'calculator'"),
        (["--tools", "python", "--max-turns", "0"], "generate.max_turns: expected at least 1, found 0"),
        (["--tools", "search"], "--tools search needs --corpus"),
        (["--corpus", "c.jsonl"], "only the search tool reads a corpus"),
        (["--tools", ","], "no tool named"),
    ],
)
def test_bad_tool_options_are_one_line_exit_2_nothing_written(tmp_path, extra, message):
    (tmp_path / "c.jsonl").write_text('{"id": "d1", "contents": "Vell Orrin wrote The Salt Road."}\n')
    prompts = write_questions(tmp_path / "q.parquet")
    out = tmp_path / "out"
    args = ["--prompts", prompts, "--teacher", "fake-teacher", "--out", str(out), *extra]
    args = [str(tmp_path / a) if a == "c.jsonl" else a for a in args]
    result = distill(args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output
    assert not out.exists()
