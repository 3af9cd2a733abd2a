"""distill filter on tool-use trajectories: the final answer verified, the trajectory checks, the funnel, sft/."""

import json

import pyarrow as pa
import pytest
from click.testing import CliRunner

from reasonkit.errors import UserError
from reasonkit.filters.command import filter as filter_command
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.filters.trajectory import unrecovered_error
from reasonkit.schema import validate
from reasonkit.store import StageWriter, read_stage

from ..helpers.synthetic import trace, write_traces

QUESTION = "What year did the author of The Glass Orchard win the Orrin Prize?"
SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the corpus.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    }
]


def user(text=QUESTION):
    return {"role": "user", "content": text, "tool_calls": None, "name": None}


def call(query, name="search"):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"name": name, "arguments": json.dumps({"query": query})}],
        "name": None,
    }


def result(text, name="search"):
    return {"role": "tool", "content": text, "tool_calls": None, "name": name}


def answer(text):
    return {"role": "assistant", "content": text, "tool_calls": None, "name": None}


FOUND = [
    call("The Glass Orchard author"),
    result("The Glass Orchard is a novel by Ada Vell."),
    call("Ada Vell Orrin Prize"),
    result("Ada Vell won the Orrin Prize in 1987."),
]


def trajectory(id, sample=0, *, turns, response="1987", finish_reason="stop", gold="1987"):
    """A trajectories row as distill generate --tools writes it (schema.py); ``turns`` after the user turn."""
    messages = [user(), *turns] + ([answer(response)] if finish_reason == "stop" else [])
    calls = sum(len(m["tool_calls"] or []) for m in turns if m["role"] == "assistant")
    errors = sum(m["role"] == "tool" and m["content"].startswith("error:") for m in turns)
    return {
        "id": id,
        "sample": sample,
        "messages": messages,
        "response": response if finish_reason == "stop" else "",
        "turns": sum(m["role"] == "assistant" for m in messages),
        "tool_calls": calls,
        "tool_errors": errors,
        "finish_reason": finish_reason,
        "prompt_tokens": 40,
        "completion_tokens": 12,
        "teacher": "tiny-agent",
        "gen_config": "3f9a0c",
        "answer": gold,
        "source": "agent",
        "tools": json.dumps(SCHEMAS),
    }


def rows():
    timeout = result("error: search timed out after 5 s")
    return [
        trajectory("right", turns=FOUND),
        trajectory("boxed", turns=FOUND, response=r"The answer is \boxed{1987}."),
        trajectory("wrong", turns=FOUND, response="1988"),
        trajectory("limit", turns=FOUND + [call("Orrin Prize 1987")], finish_reason="max_turns"),
        trajectory("unrecovered", turns=FOUND + [call("Orrin Prize winners"), timeout]),
        trajectory("recovered", turns=[call("The Glass Orchard author"), timeout] + FOUND),
        trajectory("no_tool", turns=[]),
        trajectory("prose", turns=FOUND, response="I searched twice.\nI am not sure."),
        trajectory(
            "foreign",
            turns=[{**FOUND[0], "content": "让我们先搜索这本书的作者，然后再搜索他获奖的年份。"}] + FOUND[1:],
        ),
    ]


def write(path, rows_):
    with StageWriter(
        path, stage="generate", kind="trajectories", config={"tools": "search"}, keys=("id", "sample")
    ) as w:
        w.commit(validate(pa.Table.from_pylist(rows_), "trajectories"))
        w.finish()


def config(tmp_path, **kw):
    base = dict(traces=str(tmp_path / "traj"), out=str(tmp_path / "out"), verifier="math", workers=1, batch_rows=3)
    return FilterConfig(**{**base, **kw})


def outcome(out):
    kept, rejected = read_stage(out), read_stage(out / "rejected")
    why = dict(zip(rejected.column("id").to_pylist(), rejected.column("drop_reason").to_pylist()))
    return sorted(kept.column("id").to_pylist()), why


@pytest.mark.parametrize("require_tool", [False, True])
def test_trajectories_are_verified_and_checked(tmp_path, require_tool):
    write(tmp_path / "traj", rows())
    report = run_filter(config(tmp_path, require_tool=require_tool))
    kept, why = outcome(tmp_path / "out")
    assert why == {
        "wrong": "wrong",
        "limit": "max_turns",
        "unrecovered": "tool_error_unrecovered",
        "prose": "no_answer",
        "foreign": "language",
        **({"no_tool": "no_tool_call"} if require_tool else {}),
    }
    assert kept == sorted(["right", "boxed", "recovered"] + ([] if require_tool else ["no_tool"]))
    funnel = {(s["filter"], s["reason"]): s["dropped"] for s in report["funnel"]}
    assert funnel[("trajectory", "max_turns")] == 1 and funnel[("trajectory", "tool_error_unrecovered")] == 1
    assert (("trajectory", "no_tool_call") in funnel) is require_tool
    assert report["rows_in"] == 9 and report["rows_out"] == len(kept) == report["sft_rows"]
    assert [s["reason"] for s in report["funnel"][:2]] == ["max_turns", "tool_error_unrecovered"]  # checked first
    in_, out = report["trajectories"]["in"], report["trajectories"]["kept"]
    assert in_["rows"] == 9 and in_["finish_reason"] == {"max_turns": 1, "stop": 8}
    assert out["finish_reason"] == {"stop": len(kept)}
    if not require_tool:  # right 2 calls, boxed 2, recovered 3 (one timed out), no_tool 0
        assert out["tool_calls_per_trajectory"] == 1.75 and out["tool_error_rate"] == round(1 / 7, 4)
    # the kept table is the trajectories table plus the verdicts, nothing of the filters' own scratch columns
    table = read_stage(tmp_path / "out")
    assert "completion" not in table.column_names and "reasoning" not in table.column_names
    assert dict(zip(table.column("id").to_pylist(), table.column("pred").to_pylist()))["boxed"] == "1987"


def test_sft_output_holds_the_whole_conversation_and_its_tools(tmp_path):
    write(tmp_path / "traj", rows())
    run_filter(config(tmp_path))
    sft = read_stage(tmp_path / "out" / "sft", kind="sft_tools")
    row = dict(zip(sft.column("id").to_pylist(), sft.to_pylist()))["recovered"]
    assert [m["role"] for m in row["messages"]] == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]
    assert row["messages"][1]["tool_calls"] == [
        {"name": "search", "arguments": '{"query": "The Glass Orchard author"}'}
    ]
    assert row["messages"][2] == result("error: search timed out after 5 s")
    assert json.loads(row["tools"]) == SCHEMAS


def test_exact_verifier_on_names(tmp_path):
    name = [
        trajectory("ok", turns=FOUND, response="Ada Vell.", gold="ada vell"),
        trajectory("other", turns=FOUND, response="Ada Bell", gold="Ada Vell"),
        trajectory("number", turns=FOUND, response="1987", gold="1987.0"),
    ]  # text, not value: 1987 != 1987.0
    write(tmp_path / "traj", name)
    run_filter(config(tmp_path, verifier="exact"))
    assert outcome(tmp_path / "out") == (["ok"], {"other": "wrong", "number": "wrong"})


def test_cli_require_tool(tmp_path):
    write(tmp_path / "traj", rows())
    result_ = CliRunner().invoke(
        filter_command,
        [str(tmp_path / "traj"), "--out", str(tmp_path / "out"), "--require-tool", "--workers", "1", "-q"],
    )
    assert result_.exit_code == 0, result_.output
    assert "no_tool_call" in result_.output and outcome(tmp_path / "out")[1]["no_tool"] == "no_tool_call"
    assert "trajectories kept: 3, 2.3333 tool calls each, tool-error rate 0.1429" in result_.output


def test_require_tool_on_traces_is_one_line(tmp_path):
    write_traces(tmp_path / "traj", [trace("p1", 0)])
    with pytest.raises(UserError, match="--require-tool checks tool-use trajectories"):
        run_filter(config(tmp_path, require_tool=True))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "tools, expected",
    [
        ([("search", "error: timed out"), ("search", "Ada Vell")], None),  # retried, succeeded
        ([("search", "error: timed out"), ("python", "4")], "search"),  # another tool's success is no recovery
        (
            [("python", "error: python failed: ZeroDivisionError"), ("search", "x"), ("python", "error: timed out")],
            "python",
        ),
        (
            [("", "error: bad tool call: not valid JSON"), ("search", "Ada Vell")],
            None,
        ),  # an unreadable call, then a good one
        ([("serch", "error: unknown tool 'serch' (tools: search)"), ("search", "Ada Vell")], None),
        ([("search", "Ada Vell"), ("search", "error: timed out")], "search"),  # the last result was the error
    ],
)
def test_unrecovered_error(tools, expected):
    assert unrecovered_error([result(text, name) for name, text in tools]) == expected


def test_generated_trajectories_filter_into_sft_rows_with_their_tools(tmp_path, monkeypatch):
    """distill generate --tools (a scripted backend, a real tool) -> distill filter: the sft rows carry the schemas
    the model was shown, and the final answers are verified."""
    import pyarrow.parquet as pq

    from reasonkit.gen.run import GenerateConfig, generate
    from reasonkit.gen.tools import base

    from ..helpers.gen_tools import ScriptedBackend, lookup_script

    monkeypatch.setitem(base._FACTORIES, "echo", f"{ScriptedBackend.__module__}:make_echo")
    pq.write_table(
        pa.table(
            {
                "id": [f"p{i}" for i in range(4)],
                "problem": [f"word{i}" for i in range(4)],
                "answer": ["WORD0", "WORD1", "WORD2", "other"],
            }
        ),
        tmp_path / "q.parquet",
    )
    generate(
        GenerateConfig(
            prompts=str(tmp_path / "q.parquet"),
            teacher="fake-teacher",
            out=str(tmp_path / "traj"),
            n=1,
            tools="echo",
            max_turns=4,
            instruction="",
        ),
        backend=ScriptedBackend(lookup_script),
    )
    report = run_filter(config(tmp_path, verifier="exact", require_tool=True, lang=None))
    assert outcome(tmp_path / "out") == (["p0", "p1", "p2"], {"p3": "wrong"}) and report["rows_out"] == 3
    sft = read_stage(tmp_path / "out" / "sft", kind="sft_tools").to_pylist()
    assert [f["function"]["name"] for f in json.loads(sft[0]["tools"])] == ["echo"]
    assert [m["role"] for m in sft[0]["messages"]] == ["user", "assistant", "tool", "assistant"]


def test_math_verifier_matches_word_answers_as_text(tmp_path):
    """math-verify reads a name as a product of symbols ("Vell Ada" == "Ada Vell"); a gold that is words is text."""
    name = [
        trajectory("ok", turns=FOUND, response="ada vell.", gold="Ada Vell"),
        trajectory("swapped", turns=FOUND, response="Vell Ada", gold="Ada Vell"),
        trajectory("number", turns=FOUND, response=r"\boxed{1987}", gold="1987.0"),
    ]  # numbers stay math
    write(tmp_path / "traj", name)
    run_filter(config(tmp_path))
    assert outcome(tmp_path / "out") == (["number", "ok"], {"swapped": "wrong"})
