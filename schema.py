"""The column contract: every table the stages exchange, as an explicit pyarrow schema.

Never infer a schema from the first row: a column that is all-null in one shard and a string in
the next would give two incompatible shards. Each table below lists its required columns first;
optional columns may be absent (they are added as nulls) and any extra input columns pass through
untouched, so a user's ``difficulty`` or ``topic`` column survives every stage.

>>> import pyarrow as pa
>>> t = pa.table({"id": ["a"], "messages": [[{"role": "user", "content": "1+1?"}]]})
>>> validate(t, "prompts").column_names
['id', 'messages', 'answer', 'source']
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from reasonkit.errors import UserError

#: TRL's conversational format: a list of {role, content} turns.
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
MESSAGES = pa.list_(MESSAGE)
#: A call as a trajectory stores it: ``arguments`` is the JSON text, so the schema never depends on a tool.
TOOL_CALL = pa.struct([("name", pa.string()), ("arguments", pa.string())])
#: A turn of a tool-use trajectory: MESSAGE + the assistant's ``tool_calls`` and the ``tool`` turn's ``name``
#: (null elsewhere), the shape transformers chat templates and TRL read (gen/tools/calls.py converts).
TOOL_MESSAGE = pa.struct(
    [("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(TOOL_CALL)), ("name", pa.string())]
)
TOOL_MESSAGES = pa.list_(TOOL_MESSAGE)


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    required: bool = True  # must be present in the input
    nullable: bool = False  # may hold nulls

    @property
    def field(self) -> pa.Field:
        return pa.field(self.name, self.type, nullable=self.nullable)


def _opt(name: str, type_: pa.DataType) -> Column:
    """An optional, nullable column."""
    return Column(name, type_, required=False, nullable=True)


_PROMPTS = (
    Column("id", pa.string()),
    Column("messages", MESSAGES),
    _opt("answer", pa.string()),
    _opt("source", pa.string()),
)

_TRACES = (
    Column("id", pa.string()),
    Column("sample", pa.int32()),
    Column("messages", MESSAGES),
    Column("completion", pa.string()),
    Column("reasoning", pa.string(), nullable=True),
    Column("response", pa.string()),
    Column("finish_reason", pa.string()),
    Column("prompt_tokens", pa.int32()),
    Column("completion_tokens", pa.int32()),
    Column("teacher", pa.string()),
    Column("gen_config", pa.string()),
    _opt("answer", pa.string()),
    _opt("source", pa.string()),
)

_VERDICTS = _TRACES + (
    Column("pred", pa.string(), nullable=True),
    Column("correct", pa.bool_(), nullable=True),
    Column("lang_ratio", pa.float32(), nullable=True),
    Column("keep", pa.bool_()),
    Column("drop_reason", pa.string(), nullable=True),
)

_SFT = (
    Column("id", pa.string()),
    Column("messages", MESSAGES),
    _opt("source", pa.string()),
)

_PREFS = (
    Column("id", pa.string()),
    Column("prompt", MESSAGES),
    Column("chosen", MESSAGES),
    Column("rejected", MESSAGES),
    _opt("chosen_score", pa.float32()),
    _opt("rejected_score", pa.float32()),
    Column("strategy", pa.string()),
)

#: ``distill generate --tools``: one multi-turn rollout per row. ``messages`` is the whole trajectory (the
#: prompt, every assistant turn with its ``tool_calls``, every ``tool`` observation), ``response`` the final
#: answer turn's text; ``turns`` counts assistant turns, ``tool_calls`` the calls made, ``tool_errors`` those
#: whose observation was an error; token counts are summed over the turns (gen/tools/loop.py).
_TRAJECTORIES = (
    Column("id", pa.string()),
    Column("sample", pa.int32()),
    Column("messages", TOOL_MESSAGES),
    Column("response", pa.string()),
    Column("turns", pa.int32()),
    Column("tool_calls", pa.int32()),
    Column("tool_errors", pa.int32()),
    Column("finish_reason", pa.string()),
    Column("prompt_tokens", pa.int32()),
    Column("completion_tokens", pa.int32()),
    Column("teacher", pa.string()),
    Column("gen_config", pa.string()),
    _opt("answer", pa.string()),
    _opt("source", pa.string()),
    _opt("tools", pa.string()),  # the JSON schemas the model was shown (TRL's SFT column), JSON text
)

#: SFT on tool-use trajectories (``distill filter``'s ``sft`` output of a trajectories table): TRL's
#: conversational language modeling with a ``tools`` column (the JSON schemas the chat template showed the
#: model, as JSON text), the turns in the stored shape; distill/data.py converts them for the template.
_SFT_TOOLS = (
    Column("id", pa.string()),
    Column("messages", TOOL_MESSAGES),
    _opt("tools", pa.string()),
    _opt("source", pa.string()),
)

#: ``distill score``: a traces or verdicts table + the reward model's score (null: no text to score) and, for a
#: process reward model, P(good) at the end of each step.
_SCORES = _TRACES + (
    Column("reward", pa.float32(), nullable=True),
    _opt("step_rewards", pa.list_(pa.float32())),
)

#: TRL's stepwise-supervision format (judges/steps/run.py writes it): one step per ``completions`` item,
#: ``labels`` the hard estimate (a rollout from after the step reached the gold answer), ``soft`` the
#: share of rollouts that did (Math-Shepherd's two estimates).
_STEPS = (
    Column("id", pa.string()),
    Column("prompt", pa.string()),
    Column("completions", pa.list_(pa.string())),
    Column("labels", pa.list_(pa.bool_())),
    Column("soft", pa.list_(pa.float32())),
)

#: TRL's standard (string) preference format, for pairs whose prompt ends inside an assistant turn
#: (Step-DPO: the prompt plus the correct steps), which the conversational format cannot express.
_PREFS_TEXT = (
    Column("id", pa.string()),
    Column("prompt", pa.string()),
    Column("chosen", pa.string()),
    Column("rejected", pa.string()),
    Column("strategy", pa.string()),
)

_EVAL_SAMPLES = (
    Column("id", pa.string()),
    Column("sample", pa.int32()),
    Column("pred", pa.string(), nullable=True),
    Column("correct", pa.bool_(), nullable=True),
    Column("completion_tokens", pa.int32()),
)

#: ``distill generate --logprobs K``: per completion token, the token the teacher sampled (``completion_ids``)
#: and its K most likely tokens (``logprob_ids``, most likely first) with their log-probs (``logprobs``, the
#: model's raw distribution, before temperature and top-p). Extra columns of a traces table, carried by the
#: filter into its kept rows and its ``sft`` table; ``distill train --method sft --kd-weight`` reads them.
#: float16 log-probs, not float32: measured in Parquet as the store writes it (bench/logprob_bytes.py; 200
#: traces of the embedded teacher, 23,652 tokens, temperature 0.6), the three columns take 20.7 bytes a token
#: at K=5 (24.2 with float32; the log-probs alone 10.1 vs 13.7) and 78.8 at K=20 (90.0; 38.4 vs 49.6), against
#: 1.7 for the rest of the row. float16 keeps about 3 significant digits (-10.80 is stored as -10.8046875),
#: below what separates one token's target from the next.
LOGPROB_COLUMNS = (
    Column("completion_ids", pa.list_(pa.int32())),
    Column("logprob_ids", pa.list_(pa.list_(pa.int32()))),
    Column("logprobs", pa.list_(pa.list_(pa.float16()))),
)


def missing_logprob_columns(names: list[str]) -> list[str]:
    """The teacher log-prob columns a table with columns ``names`` lacks.

    >>> missing_logprob_columns(["id", "messages", "logprobs"])
    ['completion_ids', 'logprob_ids']
    """
    return [c.name for c in LOGPROB_COLUMNS if c.name not in names]


TABLES: dict[str, tuple[Column, ...]] = {
    "prompts": _PROMPTS,
    "traces": _TRACES,
    "verdicts": _VERDICTS,
    "sft": _SFT,
    "prefs": _PREFS,
    "eval_samples": _EVAL_SAMPLES,
    "steps": _STEPS,
    "prefs_text": _PREFS_TEXT,
    "scores": _SCORES,
    "trajectories": _TRAJECTORIES,
    "sft_tools": _SFT_TOOLS,
}

#: The columns that identify a row of each table (resume keys in store.py).
KEYS: dict[str, tuple[str, ...]] = {
    "prompts": ("id",),
    "traces": ("id", "sample"),
    "verdicts": ("id", "sample"),
    "sft": ("id", "sample"),  # `sample` optional: several samples of one prompt may each give a row
    "prefs": ("id",),
    "eval_samples": ("id", "sample"),
    "steps": ("id", "sample"),  # `sample`: which solution of the prompt was labelled
    "prefs_text": ("id", "sample"),
    "scores": ("id", "sample"),
    "trajectories": ("id", "sample"),
    "sft_tools": ("id", "sample"),
}


def schema(kind: str) -> pa.Schema:
    """The contract's columns of ``kind`` as a pyarrow schema (without pass-through extras)."""
    return pa.schema([c.field for c in _columns(kind)])


def _columns(kind: str) -> tuple[Column, ...]:
    try:
        return TABLES[kind]
    except KeyError:
        raise ValueError(f"unknown table kind {kind!r}; expected one of {sorted(TABLES)}") from None


def validate(table: pa.Table, kind: str, source: str = "<table>") -> pa.Table:
    """Check ``table`` against the contract for ``kind`` and return it conformed.

    Conforming casts columns whose type converts losslessly (int64 -> int32, large_string ->
    string), adds absent optional columns as nulls, and puts contract columns first. Anything
    else raises one :class:`UserError` naming ``source``, the column, the expected and found
    type, and the first bad row.

    >>> validate(pa.table({"id": ["a"]}), "prompts", "p.jsonl")
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: p.jsonl: missing required column 'messages' (expected list<struct<role: string, content: string>>); found columns ['id']
    """  # noqa: E501
    columns = _columns(kind)
    out: dict[str, pa.ChunkedArray] = {}
    for col in columns:
        if col.name not in table.column_names:
            if col.required:
                raise UserError(
                    f"{source}: missing required column {col.name!r} (expected {_type_name(col.type)}); "
                    f"found columns {table.column_names}"
                )
            out[col.name] = pa.chunked_array([pa.nulls(len(table), col.type)], col.type)
            continue
        arr = _conform_column(table.column(col.name), col, source)
        if not col.nullable and arr.null_count:
            row = _first_index(arr.is_null())
            raise UserError(
                f"{source}: column {col.name!r} must not be null (expected {_type_name(col.type)}); "
                f"first null at row {row}"
            )
        out[col.name] = arr
    extras = [n for n in table.column_names if n not in out]
    fields = [c.field for c in columns] + [table.schema.field(n) for n in extras]
    arrays = [out[c.name] for c in columns] + [table.column(n) for n in extras]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def empty(kind: str) -> pa.Table:
    """A zero-row table with the contract's schema."""
    return schema(kind).empty_table()


def _conform_column(arr: pa.ChunkedArray, col: Column, source: str) -> pa.ChunkedArray:
    if arr.type == col.type:
        return arr
    if pa.types.is_null(arr.type):  # an all-null column read from JSON/CSV
        return pa.chunked_array([pa.nulls(len(arr), col.type)], col.type)
    try:
        return arr.cast(col.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    row, value = _first_uncastable(arr, col.type)
    where = f"; first bad row {row}: {value!r}" if row is not None else ""
    raise UserError(
        f"{source}: column {col.name!r} has type {_type_name(arr.type)}, expected {_type_name(col.type)}{where}"
    )


def _first_uncastable(arr: pa.ChunkedArray, type_: pa.DataType) -> tuple[int | None, object]:
    """The first row whose value cannot be cast to ``type_`` (row 0 when the types never convert)."""
    for i, value in enumerate(arr.combine_chunks()):
        try:
            pa.array([value.as_py()], type=arr.type).cast(type_, safe=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
            return i, _short(value.as_py())
    return None, None


def _first_index(mask: pa.ChunkedArray) -> int:
    for i, flag in enumerate(mask.combine_chunks().to_pylist()):
        if flag:
            return i
    return -1


def _short(value: object, limit: int = 80) -> object:
    text = repr(value)
    return value if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(type_: pa.DataType) -> str:
    return str(type_).replace("element: ", "").replace("item: ", "")
