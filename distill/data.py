"""Training inputs: the sft/prefs/prompts table, the student's tokenizer, and the chat template trained on.

The tables already are TRL's formats (schema.py): ``sft`` rows carry ``messages`` (conversational
language modeling) and ``prefs`` rows carry ``prompt``/``chosen``/``rejected`` (conversational
preference), so loading is validation plus column selection, never conversion. Tool-use conversations
(a ``trajectories`` table, or the filter's ``sft`` of one: :func:`sft_kind`) are the exception: their
stored calls hold arguments as JSON text, which :func:`chat_inputs` turns into the objects a chat
template serialises, with the row's ``tools`` schemas (TRL's column), so SFT trains on exactly the
text the model generated, with loss on its turns only. GRPO reads a
``prompts`` table as ``distill generate`` does and renders each prompt as generation does
(:func:`read_prompt_rows`), into TRL's conversational ``prompt`` column.

>>> import pyarrow as pa
>>> t = pa.table({"id": ["a"], "messages": [[{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}]]})
>>> load_rows(t, "sft", "t.parquet").column_names
['id', 'messages', 'source']
>>> load_rows(t, "dpo", "t.parquet")
Traceback (most recent call last):
...
reasonkit.errors.UserError: t.parquet: --method dpo needs a prefs table with columns prompt, chosen, rejected; found ['id', 'messages'] (an sft table: use --method sft)
"""  # noqa: E501

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from reasonkit.errors import UserError
from reasonkit.schema import validate

KIND = {"sft": "sft", "dpo": "prefs", "grpo": "prompts"}
_NEEDS = {
    "sft": ("messages",),
    "dpo": ("prompt", "chosen", "rejected"),
    "grpo": ("prompt", "id", "answer", "source"),
    "distill": ("prompt", "id", "answer", "source"),
}


def read_rows(path: str | os.PathLike, method: str, *, allow_incomplete: bool = False) -> pa.Table:
    """The validated training table at ``path`` (a stage directory or Parquet/JSONL files)."""
    from reasonkit.readers import read_table

    table, name = read_table(path, allow_incomplete=allow_incomplete)
    if table.num_rows == 0:  # before the column check: an empty stage may carry no columns at all
        raise UserError(f"{name}: 0 rows to train on{emptied_by(path)}")
    return load_rows(table, method, name)


def emptied_by(path: str | os.PathLike) -> str:
    """Which stage left ``path`` empty, and from how many rows, read from its manifest and report.

    A filter's ``sft`` table is a sub-directory whose report (the funnel) sits one level up.
    """
    import json

    from reasonkit.store import is_stage_dir, load_manifest

    path = Path(path)
    if not is_stage_dir(path):
        return ""
    stage = load_manifest(path).get("stage")
    report_file = next(
        (
            d / "report.json"
            for d in (path, path.parent)
            if (d / "report.json").is_file() and is_stage_dir(d) and load_manifest(d).get("stage") == stage
        ),
        None,
    )
    try:
        report = json.loads(report_file.read_text()) if report_file else {}
    except (OSError, ValueError):
        report = {}
    if not isinstance(report, dict):
        report = {}
    where = f"; report in {report_file}" if report_file else ""
    rows_in = report.get("rows_in")
    if stage == "filter" and rows_in is not None:
        drops = sorted(
            ((f.get("dropped", 0), f.get("reason")) for f in report.get("funnel", []) if f.get("dropped")),
            reverse=True,
        )
        why = ", ".join(f"{reason} {n}" for n, reason in drops[:3])
        source = f" of {report['input']}" if report.get("input") else ""
        return f": stage 'filter' kept 0 of {rows_in} rows{source} (dropped: {why or 'none'}{where})"
    if stage == "pairs" and rows_in is not None:
        why = ", ".join(f"{reason} {n}" for reason, n in (report.get("no_pair") or {}).items())
        return f": stage 'pairs' made 0 pairs from {rows_in} rows (prompts without a pair: {why or 'none'}{where})"
    return f": stage {stage!r} wrote none{' (' + where[2:] + ')' if where else ''}"


def load_rows(table: pa.Table, method: str, source: str) -> pa.Table:
    missing = [c for c in _NEEDS[method] if c not in table.column_names]
    if missing:
        other = "sft" if method == "dpo" else "dpo"
        hint = (
            f" (an {KIND[other]} table: use --method {other})"
            if all(c in table.column_names for c in _NEEDS[other])
            else ""
        )
        raise UserError(
            f"{source}: --method {method} needs a{'n' if method == 'sft' else ''} {KIND[method]} table with columns "
            f"{', '.join(_NEEDS[method])}; found {table.column_names}{hint}"
        )
    kind = prefs_kind(table) if method == "dpo" else sft_kind(table) if method == "sft" else KIND[method]
    table = validate(table, kind, source)
    if table.num_rows == 0:
        raise UserError(f"{source}: 0 rows to train on")
    return table


def prefs_kind(table: pa.Table) -> str:
    """``prefs_text`` for TRL's standard (string) preference format, whose prompt may end inside the
    assistant turn (Step-DPO's pairs, judges/steps/run.py); ``prefs`` (conversational) otherwise.

    >>> prefs_kind(pa.table({"prompt": ["<|user|>2+2?<|assistant|>"], "chosen": ["4"], "rejected": ["5"]}))
    'prefs_text'
    """
    return "prefs_text" if pa.types.is_string(table.schema.field("prompt").type) else "prefs"


def sft_kind(table: pa.Table) -> str:
    """``sft_tools`` when the turns carry tool calls (a trajectories table, or the filter's sft of one),
    ``sft`` otherwise. Told apart before validating: the sft schema's cast would drop the calls silently.

    >>> from reasonkit.schema import MESSAGES, TOOL_MESSAGES
    >>> sft_kind(pa.table({"messages": pa.array([[]], TOOL_MESSAGES)})), sft_kind(pa.table({"messages": pa.array([[]], MESSAGES)}))
    ('sft_tools', 'sft')
    """  # noqa: E501
    turns = table.schema.field("messages").type
    turn = turns.value_type if pa.types.is_list(turns) or pa.types.is_large_list(turns) else None
    return (
        "sft_tools"
        if turn is not None and pa.types.is_struct(turn) and turn.get_field_index("tool_calls") >= 0
        else "sft"
    )


def chat_inputs(row: dict) -> tuple[list[dict], list[dict] | None]:
    """``(messages, tools)`` of one sft row as ``apply_chat_template`` takes them: stored tool calls
    converted (gen/tools/calls.py), the ``tools`` schemas parsed; a plain row as it is, no tools.

    >>> chat_inputs({"messages": [{"role": "user", "content": "hi"}]})
    ([{'role': 'user', 'content': 'hi'}], None)
    """
    import json

    messages = row["messages"]
    if not any("tool_calls" in m or m.get("role") == "tool" for m in messages):
        return messages, None
    from reasonkit.gen.tools.calls import template_messages

    tools = row.get("tools")
    return template_messages(messages), (json.loads(tools) if isinstance(tools, str) else tools) or None


def uses_tools(messages: list[dict]) -> bool:
    """Whether a conversation calls a tool or reads a tool's result."""
    return any(m.get("tool_calls") or m.get("role") == "tool" for m in messages)


def read_prompt_rows(cfg) -> pa.Table:
    """GRPO's (and on-policy distillation's) prompts: ``id``, ``prompt`` (the messages generation sends), ``answer`` (the gold, for the rewards),
    ``source``.

    Read by :func:`reasonkit.readers.read_prompts` (Parquet/JSONL/CSV, a stage directory, a Hub dataset
    id); each prompt rendered by :func:`reasonkit.gen.render.build_messages` with ``cfg.instruction`` and
    ``cfg.system``, so the student is trained on exactly the prompts a teacher was sampled on: a user
    turn ``problem + "\\n\\n" + instruction``, never an assistant turn last.

    >>> import json, tempfile, os
    >>> from reasonkit.distill.config import TrainConfig
    >>> p = os.path.join(tempfile.mkdtemp(), "p.jsonl")
    >>> _ = open(p, "w").write(json.dumps({"problem": "Compute 17 x 23", "answer": "391"}) + "\\n")
    >>> row = read_prompt_rows(TrainConfig(method="grpo", student="m", data=p, out="o", instruction="Think.")).to_pylist()[0]
    >>> row["prompt"], row["answer"]
    ([{'role': 'user', 'content': 'Compute 17 x 23\\n\\nThink.'}], '391')
    >>> read_prompt_rows(TrainConfig(method="grpo", student="m", data=p.replace("p.jsonl", "q.jsonl"), out="o"))
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: ...q.jsonl: no such file
    """  # noqa: E501
    from reasonkit.gen.render import build_messages
    from reasonkit.readers import read_prompts
    from reasonkit.schema import MESSAGES

    prompts = read_prompts(cfg.data)
    rewards = cfg.rewards if cfg.method == "grpo" else {}  # distillation's target is the teacher, not an answer
    if "accuracy" in rewards:
        _check_answers(prompts, str(cfg.data))
    problems = (
        prompts.column("problem").to_pylist() if "problem" in prompts.column_names else [None] * prompts.num_rows
    )
    rendered = [
        build_messages(m, problem=p, instruction=cfg.instruction, system=cfg.system)
        for m, p in zip(prompts.column("messages").to_pylist(), problems)
    ]
    columns = {
        "id": prompts.column("id"),
        "prompt": pa.array(rendered, MESSAGES),
        "answer": prompts.column("answer"),
        "source": prompts.column("source"),
    }
    if "code" in rewards:  # the code reward runs each completion's program against the prompt's tests
        columns["tests"] = _tests_column(prompts, str(cfg.data))
    return pa.table(columns)


def _check_answers(prompts: pa.Table, name: str) -> None:
    """The accuracy reward's gold answers: a UserError when no prompt has one."""
    if prompts.column("answer").null_count == prompts.num_rows:
        extra = [c for c in prompts.column_names if c not in ("id", "messages", "answer", "source", "problem")]
        raise UserError(
            f"{name}: the accuracy reward needs each prompt's gold answer in an 'answer' column; there is none "
            f"(other columns: {extra or 'none'}); rename the column holding it to 'answer', or train without "
            f"accuracy (--reward format=1.0 ...)"
        )


def _tests_column(prompts: pa.Table, name: str) -> pa.ChunkedArray | pa.Array:
    """The code reward's tests, as JSON text (a UserError when the prompts have none)."""
    if "tests" not in prompts.column_names:
        raise UserError(
            f"{name}: the code reward needs each prompt's tests (JSON: APPS/TACO, CodeContests or "
            f"LiveCodeBench shapes) in a 'tests' column; found columns {prompts.column_names}"
        )
    tests = prompts.column("tests")
    if not pa.types.is_string(tests.type):  # an object column read from JSONL: back to JSON text
        import json

        tests = pa.array([None if t is None else json.dumps(t) for t in tests.to_pylist()], pa.string())
    return tests


def to_dataset(table: pa.Table, method: str, *, logprobs: bool = False):
    """A ``datasets.Dataset`` holding only the columns the TRL trainer reads (``logprobs``: and the teacher's
    log-prob columns, for ``--kd-weight``: distill/kd.py).

    Tool-use conversations go in converted (:func:`chat_inputs`), each turn a ``Json`` value: Arrow
    would otherwise merge every tool's arguments into one struct, and the template would then write
    ``"code": null`` into a search call. TRL's SFT renders the ``tools`` column (JSON text) itself.
    """
    import datasets

    if method == "sft" and sft_kind(table) == "sft_tools":
        import json

        rows = [chat_inputs(row) for row in table.select(["messages", "tools"]).to_pylist()]
        features = datasets.Features({"messages": datasets.List(datasets.Json()), "tools": datasets.Value("string")})
        return datasets.Dataset.from_dict(
            {"messages": [m for m, _ in rows], "tools": [json.dumps(t) if t else None for _, t in rows]},
            features=features,
        )
    extra = ["tests"] if method == "grpo" and "tests" in table.column_names else []  # the code reward's column
    if logprobs:
        from reasonkit.schema import LOGPROB_COLUMNS

        extra += [c.name for c in LOGPROB_COLUMNS]
    return datasets.Dataset(table.select(list(_NEEDS[method]) + extra))


# -- the student's tokenizer and template ---------------------------------------------------------
def is_adapter_dir(path: str) -> bool:
    return (Path(path) / "adapter_config.json").is_file()


def model_ref(student: str) -> str:
    """A local student as an absolute path (the saved adapter records it as its base), else the Hub id."""
    path = Path(student)
    return str(path.resolve()) if path.exists() else student


def load_tokenizer(cfg):
    """The student's tokenizer, with ``cfg.pad_token`` applied (the lint judges the result)."""
    from transformers import AutoTokenizer

    if is_adapter_dir(cfg.student):
        raise UserError(
            f"{cfg.student}: is a LoRA adapter, not a model; train on the model it adapts, or fold it in first "
            "(rerun that training with --merge and pass OUT/merged as --student)"
        )
    try:
        tok = AutoTokenizer.from_pretrained(model_ref(cfg.student))
    except OSError as e:
        raise UserError(f"{cfg.student}: cannot load the student's tokenizer ({str(e).splitlines()[0]})") from None
    if cfg.pad_token is not None:
        if cfg.pad_token not in tok.get_vocab():
            raise UserError(f"pad_token: {cfg.pad_token!r} is not in the vocabulary of {cfg.student}")
        tok.pad_token = cfg.pad_token
    return tok


def resolve_template(tok, cfg) -> str | None:
    """Install the chat template to train with on ``tok``; returns a note when it is not the student's own.

    SFT computes loss on assistant tokens only, which needs ``{% generation %}`` markers in the template.
    A student whose template lacks them gets TRL's training version of the same template (it renders
    identical text, with the markers) and the run says so; an unknown template is an error, since
    guessing a format would train the student on text it never sees at inference.
    """
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    if cfg.chat_template is not None:
        try:
            tok.chat_template = Path(cfg.chat_template).read_text()
        except OSError as e:
            raise UserError(f"chat_template: cannot read {cfg.chat_template} ({e.strerror})") from None
        return f"chat template from {cfg.chat_template}"
    if not tok.chat_template:
        raise UserError(
            f"{cfg.student}: the tokenizer has no chat template; pass --set chat_template=FILE.jinja "
            "(with the assistant turn inside {% generation %}...{% endgeneration %})"
        )
    if cfg.method != "sft" or has_generation_markers(tok.chat_template):
        return None  # DPO scores prompt+completion minus the prompt and needs no markers
    try:
        patched = get_training_chat_template(tok)
    except ValueError:
        if cfg.lint == "error":  # the lint reports it with the student's other problems, then stops the run
            return "the student's chat template lacks {% generation %} markers"
        raise UserError(
            f"{cfg.student}: the chat template has no {{% generation %}} markers, so assistant-only loss cannot "
            "find the assistant tokens, and TRL has no training version of this template; run distill "
            "prepare-student on it (--template chatml, llama3) or pass --set chat_template=FILE.jinja: the same "
            "template with each assistant turn (and its end-of-turn token) wrapped in {% generation %}...{% "
            "endgeneration %}"
        ) from None
    if patched is None:
        return None
    tok.chat_template = patched
    return "the student's chat template lacks {% generation %} markers; training with TRL's marked version of it"


def stop_ids(tok, student: str) -> set[int]:
    """Token ids that end generation: the tokenizer's EOS and the generation config's ``eos_token_id``."""
    from transformers import GenerationConfig

    ids = {tok.eos_token_id} if tok.eos_token_id is not None else set()
    try:
        eos = GenerationConfig.from_pretrained(model_ref(student)).eos_token_id
    except OSError:  # no generation_config.json: the tokenizer's EOS is all there is
        eos = None
    ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    return ids


def max_positions(student: str) -> int | None:
    """The student's context length from its config, without loading weights."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(student)
    except OSError as e:
        raise UserError(f"{student}: cannot load the student's config ({str(e).splitlines()[0]})") from None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return getattr(text, "max_position_embeddings", None)
