"""gen/ without a model: rendering, the think split, retries, sharding and resume with a fake
backend, config and command-line errors. Seconds, not minutes."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from reasonkit.errors import UserError
from reasonkit.gen.backend import Backend, Completion, derive_seed
from reasonkit.gen.command import generate as generate_command
from reasonkit.gen.render import R1_INSTRUCTION, THINK_PREFILL, build_messages, prompt_text
from reasonkit.gen.retry import RetryPolicy, parse_retry_after
from reasonkit.gen.run import GenerateConfig, generate, output_settings
from reasonkit.store import fingerprint, load_manifest, read_stage
from reasonkit.think import split


def test_command_module_imports_nothing_heavy():
    import subprocess
    import sys

    probe = (
        "import sys; import reasonkit.gen.command; "
        "print([m for m in ('torch', 'vllm', 'transformers', 'openai', 'pyarrow', 'rich') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- the think split ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, prefilled, expected",
    [
        ("<think>\nwork\n</think>\n\nThe answer is \\boxed{6}.", False, ("work", "The answer is \\boxed{6}.")),
        ("work</think>answer", False, ("work", "answer")),  # template prefilled <think>
        ("work</think>answer", True, ("work", "answer")),
        ("<think>\nran out of tokens", False, ("ran out of tokens", "")),
        ("ran out of tokens", True, ("ran out of tokens", "")),  # prefilled and never closed
        ("plain answer", False, (None, "plain answer")),
        ("<think></think>answer", False, ("", "answer")),
        ("<think>a</think>b</think>c", False, ("a", "b</think>c")),  # only the first close counts
    ],
)
def test_think_split(text, prefilled, expected):
    assert split(text, prefilled=prefilled) == expected


# -- rendering ---------------------------------------------------------------------------------
def test_problem_gets_the_instruction_and_messages_are_used_as_given():
    msgs = [{"role": "user", "content": "What is 2 * 3?"}]
    assert build_messages(msgs, problem="What is 2 * 3?")[-1]["content"] == f"What is 2 * 3?\n\n{R1_INSTRUCTION}"
    assert build_messages(msgs, problem=None) == msgs
    assert build_messages(msgs, problem="What is 2 * 3?", instruction="") == msgs
    with_system = build_messages([{"role": "system", "content": "old"}, *msgs], system="new")
    assert with_system[0] == {"role": "system", "content": "new"} and len(with_system) == 2


def test_prompt_text_prefill_and_override(tmp_path):
    from reasonkit.recipes.teachers.tiny import build_tokenizer

    tok = build_tokenizer(["What is 12 * 34? <think> </think>"], vocab_size=300)
    msgs = [{"role": "user", "content": "hi"}]
    assert prompt_text(tok, msgs) == "<|user|>hi<|end|><|assistant|>"
    assert prompt_text(tok, msgs, prefill=THINK_PREFILL).endswith("<|assistant|><think>\n")
    assert prompt_text(tok, msgs, chat_template="Q: {{ messages[0]['content'] }} A:") == "Q: hi A:"
    # a template that opens the think block itself is not given a second one
    opened = "{{ messages[0]['content'] }}<think>\n"
    assert (
        prompt_text(tok, msgs, chat_template=opened, prefill=THINK_PREFILL) == "hi<think>"
    )  # jinja drops the last \\n


# -- retries ------------------------------------------------------------------------------------
def test_retry_after_forms():
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert parse_retry_after({}) is None


@pytest.fixture
def scripted_server():
    """A loopback chat-completions server answering each POST with the next scripted status
    (then 200): yields (url, script list, hit count list)."""
    import http.server
    import threading

    script, hits = [], []
    ok = json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length", 0)))
            hits.append(1)
            code, headers = script.pop(0) if script else (200, {})
            body = ok if code == 200 else json.dumps({"error": {"message": f"status {code}"}}).encode()
            self.send_response(code)
            for key, value in {
                **headers,
                "content-type": "application/json",
                "content-length": str(len(body)),
            }.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", script, hits
    server.shutdown()


def call_with_policy(url, policy):
    """One chat request through the real client under ``policy``'s tenacity loop; the waits are
    recorded instead of slept. Returns (response text or the exception, waits, retries)."""
    import asyncio

    import openai

    waits, retries = [], []

    async def record(seconds):
        waits.append(seconds)

    async def call():
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        try:
            async for attempt in policy.retrying(on_retry=lambda: retries.append(1), sleep=record):
                with attempt:
                    r = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
                    return r.choices[0].message.content
        except openai.APIError as e:
            return e
        finally:
            await client.close()

    return asyncio.run(call()), waits, len(retries)


def test_retry_after_is_honoured_and_backoff_is_jittered(scripted_server):
    url, script, hits = scripted_server
    script += [
        (429, {"retry-after": "7"}),
        (503, {}),
        (429, {"retry-after-ms": "250"}),
        (429, {"retry-after": "9999"}),
    ]
    result, waits, retries = call_with_policy(url, RetryPolicy(base=0.5, cap=4, max_retry_after=600))
    assert result == "ok" and len(hits) == 5 and retries == 4
    assert waits[0] == 7.0 and 0 <= waits[1] <= 0.5 * 2 and waits[2] == 0.25 and waits[3] == 600  # clipped


def test_transient_failures_give_up_after_max_retries_with_bounded_full_jitter(scripted_server):
    import openai

    url, script, hits = scripted_server
    script += [(500, {})] * 30
    result, waits, _ = call_with_policy(url, RetryPolicy(max_retries=6, base=0.5, cap=4))
    assert isinstance(result, openai.InternalServerError) and len(hits) == 7 and len(waits) == 6
    assert all(0 <= w <= min(4, 0.5 * 2**k) for k, w in enumerate(waits))
    assert len({round(w, 6) for w in waits}) > 1  # drawn, not a fixed schedule


@pytest.mark.parametrize("status", [401, 403, 404])
def test_settings_errors_are_not_retried(scripted_server, status):
    import openai

    url, script, hits = scripted_server
    script.append((status, {}))
    result, waits, _ = call_with_policy(url, RetryPolicy())
    assert isinstance(result, openai.APIStatusError) and result.status_code == status
    assert len(hits) == 1 and waits == []


def test_derived_seeds_are_stable_and_int32():
    seeds = {derive_seed(0, f"p{i}") for i in range(1000)}
    assert len(seeds) == 1000 and max(seeds) + 1024 < 2**31
    assert derive_seed(0, "p1") == derive_seed(0, "p1") != derive_seed(1, "p1")


# -- the stage with a fake backend ---------------------------------------------------------------
class FakeBackend:
    """Deterministic text from (seed, sample); ``fail_after`` raises mid-run like a crash."""

    name = "fake"

    def __init__(self, fail_after=None):
        self.fail_after, self.seen = fail_after, []

    def describe(self):
        return {"backend": "fake"}

    def close(self):
        pass

    def generate(self, requests):
        count = 0
        for r in requests:
            self.seen.append(r.id)
            for k in range(r.n):
                if self.fail_after is not None and count >= self.fail_after:
                    raise RuntimeError("simulated crash")
                count += 1
                text = f"<think>s{r.sampling.seed}+{k}</think>answer {r.id}"
                yield Completion(r.id, k, text, "length" if k == 1 else "stop", 10, 5)


def write_prompts(path, n=10, extra=True):
    rows = {
        "id": [f"p{i}" for i in range(n)],
        "problem": [f"What is {i} * 2?" for i in range(n)],
        "answer": [str(2 * i) for i in range(n)],
    }
    if extra:
        rows["difficulty"] = list(range(n))
    pq.write_table(pa.table(rows), path)
    return str(path)


def config(tmp_path, **kw):
    if "prompts" not in kw:
        kw["prompts"] = write_prompts(tmp_path / "p.parquet")
    return GenerateConfig(teacher="fake-teacher", out=str(tmp_path / "out"), n=2, shard_size=3, **kw)


def test_fake_backend_satisfies_protocol():
    assert isinstance(FakeBackend(), Backend)


def test_stage_writes_traces_with_provenance(tmp_path):
    cfg = config(tmp_path)
    manifest = generate(cfg, backend=FakeBackend())
    assert manifest["complete"] and manifest["rows"] == 20 and len(manifest["shards"]) == 4
    t = read_stage(cfg.out, kind="traces")
    assert sorted(zip(t["id"].to_pylist(), t["sample"].to_pylist())) == sorted(
        (f"p{i}", k) for i in range(10) for k in range(2)
    )
    row = t.filter(pa.compute.equal(t["id"], "p3")).to_pylist()[0]
    assert row["messages"] == [{"role": "user", "content": f"What is 3 * 2?\n\n{R1_INSTRUCTION}"}]
    assert row["reasoning"].startswith("s") and row["response"] == "answer p3"
    assert row["teacher"] == "fake-teacher" and row["difficulty"] == 3 and row["answer"] == "6"
    assert set(t["gen_config"].to_pylist()) == {manifest["config_fingerprint"]}
    assert manifest["gen_config"] == fingerprint(output_settings(cfg, None))
    assert manifest["summary"] == {
        "rows": 20,
        "prompts": 10,
        "prompt_tokens": 200,
        "completion_tokens": 100,
        "truncated": 10,
        "errors": 0,
    }


def test_crash_then_rerun_gives_the_rows_of_an_uninterrupted_run(tmp_path):
    prompts = write_prompts(tmp_path / "p.parquet")
    whole = generate(config(tmp_path / "a", prompts=prompts), backend=FakeBackend())
    cfg = config(tmp_path / "b", prompts=prompts)
    with pytest.raises(RuntimeError, match="simulated crash"):
        generate(cfg, backend=FakeBackend(fail_after=9))  # dies inside the second shard
    partial = load_manifest(cfg.out)
    assert not partial["complete"] and partial["rows"] == 6
    again = FakeBackend()
    generate(cfg, backend=again)
    assert "p0" not in again.seen and "p3" in again.seen  # committed prompts were skipped
    assert whole["complete"]
    a, b = read_stage(tmp_path / "a" / "out"), read_stage(cfg.out)
    key = lambda t: sorted(zip(t["id"].to_pylist(), t["sample"].to_pylist(), t["completion"].to_pylist()))  # noqa: E731
    assert key(a) == key(b) and b.num_rows == 20


def test_resume_with_a_larger_limit_extends(tmp_path):
    prompts = write_prompts(tmp_path / "p.parquet")
    generate(config(tmp_path, prompts=prompts, limit=4), backend=FakeBackend())
    second = FakeBackend()
    manifest = generate(config(tmp_path, prompts=prompts, limit=10, concurrency=7), backend=second)
    assert manifest["rows"] == 20 and "p0" not in second.seen and "p4" in second.seen


def test_changed_sampling_refuses_to_mix(tmp_path):
    prompts = write_prompts(tmp_path / "p.parquet")
    generate(config(tmp_path, prompts=prompts), backend=FakeBackend())
    with pytest.raises(UserError, match="different config fingerprint"):
        generate(config(tmp_path, prompts=prompts, temperature=1.0), backend=FakeBackend())
    assert generate(config(tmp_path, prompts=prompts, temperature=1.0, overwrite=True), backend=FakeBackend())[
        "complete"
    ]


# -- bad input: one clear line, exit 2, before any work -----------------------------------------
def run_cli(args):
    result = CliRunner().invoke(generate_command, args)
    return result.exit_code, result.output


@pytest.fixture
def base_args(tmp_path, tiny_model_dir):
    return [
        "--prompts",
        write_prompts(tmp_path / "p.parquet"),
        "--teacher",
        tiny_model_dir,
        "--out",
        str(tmp_path / "out"),
        "--max-tokens",
        "16",
    ]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--n", "0"], "generate.n: expected at least 1, found 0"),
        (["--backend", "tgi"], "Invalid value for '--backend'"),
        (["--top-p", "0"], "generate.top_p: expected in (0, 1], found 0.0"),
        (["--max-tokens", "4096"], "--max-tokens 4096 does not fit the model's length (1024 tokens"),
        (["--problem-col", "question"], "no 'messages' or 'question' column"),
        (["--set", "temprature=1"], "generate.temprature: unknown key; did you mean temperature?"),
        (["--backend", "openai"], "generate.base_url: --backend openai needs one"),
        (["--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"], "cannot connect"),
        (["--chat-template", "/nonexistent.jinja"], "--chat-template /nonexistent.jinja: no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(base_args, extra, message):
    code, output = run_cli(base_args + extra)
    assert code == 2, output
    assert message in output
    assert "Traceback" not in output


def test_missing_model_directory(base_args, tmp_path):
    args = list(base_args)
    args[args.index("--teacher") + 1] = str(tmp_path / "no-such-model")
    code, output = run_cli(args)
    assert code == 2 and f"--teacher {tmp_path / 'no-such-model'}: no such model directory" in output
    assert not (tmp_path / "out").exists()  # nothing started


def test_config_file_then_flags_then_set(tmp_path, monkeypatch):
    import reasonkit.gen.run as gen_run

    seen = {}
    monkeypatch.setattr(gen_run, "generate", lambda cfg: seen.setdefault("cfg", cfg))
    yaml_file = tmp_path / "gen.yaml"
    yaml_file.write_text(
        json.dumps({"generate": {"prompts": "p.jsonl", "teacher": "t", "out": "o", "n": 4, "seed": 3}})
    )
    code, output = run_cli(["--config", str(yaml_file), "--n", "2", "--set", "seed=9", "--problem-col", "q"])
    assert code == 0, output
    cfg = seen["cfg"]
    assert (cfg.n, cfg.seed, cfg.temperature, cfg.columns.problem) == (2, 9, 0.6, "q")
