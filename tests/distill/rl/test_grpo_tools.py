"""`distill train --method grpo --tools search`: TRL's tool loop on the agent task, for real.

A real GRPOTrainer (CPU, fp32, LoRA) on the embedded tool-using teacher samples trajectories that call the
real BM25 search over the agent task's corpus; the observations' tokens are masked out of the loss (the
tool_mask TRL computes, intercepted from the trainer, checked token by token against what the tool
returned); the accuracy reward of every trajectory is what `distill filter` says about the same
trajectory (its rollouts are a trajectories table the filter reads); the weights move. Bad input is
one line, exit 2, nothing written."""

import json

import pyarrow as pa
import pytest
from click.testing import CliRunner
from safetensors.torch import load_file
from trl import GRPOTrainer

from reasonkit.cli import cli
from reasonkit.distill.config import TrainConfig
from reasonkit.distill.rl.grpo import RolloutGRPOTrainer
from reasonkit.distill.train import train
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.filters.trajectory import TrajectoryVerifyFilter
from reasonkit.gen.tools.search import make_search
from reasonkit.recipes.tasks import agent as agent_task
from reasonkit.recipes.teachers.agent import SEARCH_K
from reasonkit.store import read_stage

STEPS, G, BATCH, TURNS = 2, 4, 8, 3


@pytest.fixture(scope="module")
def task_files(tmp_path_factory):
    """The agent task's corpus (the world the teacher learnt) and eight held-out questions (books it never saw)."""
    tmp = tmp_path_factory.mktemp("agent")
    corpus = agent_task.write_corpus(tmp / "corpus.jsonl")
    prompts = agent_task.write_prompts(tmp / "prompts.parquet", n=8, split="test")
    return corpus, prompts


@pytest.fixture(scope="module")
def tool_student(tmp_path_factory):
    """A random tiny Llama under the tool-capable tokenizer (TRL's Qwen2.5 template): a student the checks accept."""
    from reasonkit.recipes.teachers.tiny import TinyLlama, build_model
    from reasonkit.recipes.teachers.tiny_tools import build_tool_tokenizer

    out = tmp_path_factory.mktemp("tool_student")
    build_model(
        build_tool_tokenizer(["Favi Guges won the Kuge Prize in 1983."] * 4, out, vocab_size=300),
        out,
        shape=TinyLlama(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64),
    )
    return str(out)


def settings(student, prompts, corpus, out, **kw):
    return (
        dict(
            method="grpo",
            student=str(student),
            data=str(prompts),
            out=str(out),
            tools="search",
            corpus=str(corpus),
            search_k=SEARCH_K,
            max_turns=TURNS,
            max_steps=STEPS,
            num_generations=G,
            batch_size=BATCH,
            max_completion_length=320,
            lr=2e-3,
            warmup=0,
            threads=1,
            save_steps=1000,
            temperature=1.0,
            # cosine (open-r1's length-scaled accuracy) gives a group of equally right or wrong trajectories an
            # advantage too, so the weights move whatever share of answers the tiny teacher gets right
            rewards={"accuracy": 1.0, "cosine": 0.5},
        )
        | kw
    )


@pytest.fixture(scope="module")
def run(agent_teacher_dir, task_files, tmp_path_factory):
    """A two-step run; every generation's completions, TRL's tool_mask and the mask the loss was given, kept."""
    corpus, prompts = task_files
    out = tmp_path_factory.mktemp("grpo_tools") / "run"
    seen = {"generations": [], "loss_masks": []}
    generate_and_score, compute_loss = (
        RolloutGRPOTrainer._generate_and_score_completions,
        RolloutGRPOTrainer.compute_loss,
    )

    def spy_generation(self, inputs):
        output = generate_and_score(self, inputs)
        seen["generations"].append(
            {
                "completions": self._sampled[3],
                "completion_ids": output["completion_ids"].tolist(),
                "completion_mask": output["completion_mask"].tolist(),
                "tool_mask": output["tool_mask"].tolist(),
                "tokenizer": self._tokenizer,
            }
        )
        return output

    def spy_loss(self, model, inputs, *args, **kwargs):
        seen["loss_masks"].append(inputs["tool_mask"].tolist() if "tool_mask" in inputs else None)
        return compute_loss(self, model, inputs, *args, **kwargs)

    def spy_turn(self, prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs):
        # TRL's sampler, reached through RolloutGRPOTrainer's override: the policy in eval mode, for the first
        # turn (G samples per prompt) and for every turn after a tool round (one sample per conversation)
        seen["turns"].append((num_generations, self.accelerator.unwrap_model(self.model).training))
        return single_turn(self, prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs)

    seen["turns"] = []
    single_turn = GRPOTrainer._generate_single_turn
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GRPOTrainer, "_generate_single_turn", spy_turn)
        patch.setattr(RolloutGRPOTrainer, "_generate_and_score_completions", spy_generation)
        patch.setattr(RolloutGRPOTrainer, "compute_loss", spy_loss)
        report = train(TrainConfig(**settings(agent_teacher_dir, prompts, corpus, out)))
    return report, out, seen


def test_the_policy_calls_the_real_search_and_its_weights_move(run, task_files):
    report, out, seen = run
    assert report["steps"] == STEPS
    calls = [r["tool_calls_per_completion"] for r in report["history"]]
    assert all(c > 0 for c in calls), report["history"]  # TRL's tools/call_frequency: the tool loop ran
    rows = read_stage(out / "rollouts").to_pylist()
    assert len(rows) == STEPS * BATCH and sum(r["tool_calls"] for r in rows) > 0
    assert max(r["turns"] for r in rows) <= TURNS  # max_turns 3: at most two rounds of calls (TRL's iterations)
    search = make_search(str(task_files[0]), k=SEARCH_K)  # the tool as `distill generate --tools search` builds it
    for r in rows:
        observations = [m for m in r["messages"] if m["role"] == "tool"]
        assert r["tool_calls"] == len(observations) and r["turns"] == sum(
            m["role"] == "assistant" for m in r["messages"]
        )
        calls = [c for m in r["messages"] if m["role"] == "assistant" for c in m["tool_calls"] or []]
        for call, seen_back in zip(calls, observations):  # what the model read is what the real BM25 search returns
            assert call["name"] == seen_back["name"] == "search"
            query = json.loads(call["arguments"]).get("query")
            if seen_back["content"].startswith("{'error'"):  # TRL's observation of a failed call (counted)
                continue
            assert seen_back["content"] == search(query), (query, seen_back)
        assert json.loads(r["tools"])[0]["function"]["name"] == "search"
    adapter = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    assert any("lora_B" in name and w.abs().max() > 0 for name, w in adapter.items())  # peft starts lora_B at zero


def test_tool_results_are_masked_out_of_the_loss_token_by_token(run):
    _, _, seen = run
    checked = 0
    for gen in seen["generations"]:
        tok = gen["tokenizer"]
        for completion, ids, mask, valid in zip(
            gen["completions"], gen["completion_ids"], gen["tool_mask"], gen["completion_mask"]
        ):
            n = sum(valid)
            ids, mask = ids[:n], mask[:n]
            observations = [m["content"] for m in completion if m["role"] == "tool"]
            # the masked spans, each decoded: exactly the template's wrapping of one round of observations
            spans, current = [], []
            for token, m in zip(ids, mask):
                if m == 0:
                    current.append(token)
                elif current:
                    spans.append(current)
                    current = []
            spans += [current] if current else []
            # one masked span per round of calls (one call a round here), each exactly the template's wrapping of
            # the observation the tool returned, and starting right after the <|im_end|> of the turn that called
            assert len(spans) == len(observations), (spans, observations)
            for span, content in zip(spans, observations):
                assert (
                    tok.decode(span)
                    == f"\n<|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"  # noqa: E501
                )
            starts = [i for i in range(len(mask)) if mask[i] == 0 and (i == 0 or mask[i - 1] == 1)]
            assert all(i > 0 and ids[i - 1] == tok.eos_token_id for i in starts)
            # everything else is the policy's: its turns, each ending in <|im_end|> (but a last one cut at the limit)
            trained = tok.decode([t for t, m in zip(ids, mask) if m == 1])
            assert all(c not in trained for c in observations)
            assert trained.count("<|im_end|>") >= len(spans)
            checked += len(observations)
    assert checked > 0
    # every turn was sampled through RolloutGRPOTrainer's sampling policy (eval mode), the tool rounds' too
    assert {g for g, _ in seen["turns"]} == {G, 1} and not any(training for _, training in seen["turns"])
    # the loss was handed the same mask (TRL multiplies completion_mask by it)
    assert seen["loss_masks"] and all(m is not None for m in seen["loss_masks"])
    assert sum(map(len, seen["loss_masks"])) == sum(len(g["tool_mask"]) for g in seen["generations"])


def test_rewards_are_what_distill_filter_says_about_the_same_trajectories(run, tmp_path):
    _, out, _ = run
    rows = read_stage(out / "rollouts").to_pylist()
    report = run_filter(
        FilterConfig(
            traces=str(out / "rollouts"), out=str(tmp_path / "verified"), verifier="math", lang=None, dedup="none"
        )
    )
    assert report["rows_in"] == len(rows)
    verdicts = pa.concat_tables(
        [read_stage(tmp_path / "verified" / "rejected"), read_stage(tmp_path / "verified")], promote_options="default"
    ).to_pylist()
    by_key = {(v["id"], v["sample"]): v for v in verdicts}
    verifier = TrajectoryVerifyFilter("math").verifier
    seen = {True: 0, False: 0}
    for r in rows:
        v = by_key[(r["id"], r["sample"])]
        if v["drop_reason"] in (None, "wrong", "no_answer"):  # reached the verifier: its verdict is the reward
            assert r["reward_accuracy"] == (1.0 if v["correct"] else 0.0), (r["response"], r["answer"], v)
            seen[bool(v["correct"])] += 1
        elif v["drop_reason"] == "unverifiable":  # neither can tell: no reward
            assert r["reward_accuracy"] is None, (r["response"], v)
        elif r["finish_reason"] == "length":  # cut at the token limit: no answer (the reward's, R1's protocol)
            assert r["reward_accuracy"] == 0.0 and v["drop_reason"] == "truncated", (r, v)
        else:  # dropped before the verifier (turn limit, format): the answer the filter read, checked by its verifier
            ok = None if v["pred"] is None else verifier.check([(v["pred"], r["answer"])])[0][0]
            assert r["reward_accuracy"] == (0.0 if v["pred"] is None else None if ok is None else float(ok)), (r, v)
    # the filter judged trajectories, so the comparison compared something (both verdicts, on the teacher's answers
    # and on made ones: test_the_accuracy_reward_is_the_filters_verdict_on_trajectory_answers)
    assert seen[True] + seen[False] >= len(rows) // 4, seen


# long: one table of real trajectories and the verdict each must get
def test_the_accuracy_reward_is_the_filters_verdict_on_trajectory_answers(tmp_path):
    """Real trajectories (the agent task's reference calls, the real search's observations) ending in each kind of
    final answer: boxed right and wrong, a plain short line, a name as gold (word order matters: math-verify alone
    would call "Vell Ada" equal to "Ada Vell"), and a turn limit hit; written through the rollouts log as a tool run
    writes them, read back by `distill filter`, whose verdict must be the reward's for every one."""
    from reasonkit.distill.rl.rollouts import RolloutLog
    from reasonkit.distill.rl.tools import trajectory_row
    from reasonkit.reward.functions import make_rewards

    corpus = agent_task.write_corpus(tmp_path / "corpus.jsonl", agent_task.make_world(0, 60))
    search = make_search(corpus)
    questions = agent_task.questions(agent_task.make_world(0, 60), "train")[:6]
    year, name = questions[0]["answer"], questions[0]["author"]
    first, last = name.split()
    endings = [  # (final turn, gold)
        (f"The answer is \\boxed{{{year}}}.", year),
        (f"The answer is \\boxed{{{int(year) + 1}}}.", year),
        (f"{year}.", year),
        (f"\\boxed{{{name}}}", name),
        (f"\\boxed{{{last} {first}}}", name),
        (None, year),
    ]
    examples, completions = [], []
    for i, ((final, gold), q) in enumerate(zip(endings, questions)):
        messages = agent_task.reference_messages(q, search)
        prompt, completion = (
            messages[:1],
            messages[1:-1] if final is None else [*messages[1:-1], {"role": "assistant", "content": final}],
        )
        examples.append({"id": f"q{i}", "prompt": prompt, "answer": gold, "source": agent_task.SOURCE})
        completions.append(completion)
    [accuracy], _ = make_rewards({"accuracy": 1.0}, max_completion_length=512, trajectory=True)
    rewards = accuracy(
        [e["prompt"] for e in examples], completions, [[5, 9]] * len(examples), answer=[e["answer"] for e in examples]
    )
    assert rewards[:3] == [1.0, 0.0, 1.0] and rewards[5] == 0.0  # a plain "1987." counts; no final turn, no answer

    log = RolloutLog(
        tmp_path / "rollouts",
        names=["accuracy"],
        run={"fingerprint": "f"},
        input_fingerprint="i",
        data="p",
        tools=True,
    )
    rows = []
    for example, completion, reward in zip(examples, completions, rewards):
        row = trajectory_row(example, completion, [1, 2], [5, 9], [1, 1], {9}, [])
        row.pop("completion")
        rows.append(
            {
                **row,
                "response": completion[-1]["content"],
                "teacher": "t",
                "gen_config": "g",
                "step": 1,
                "reward": reward,
                "reward_accuracy": reward,
                "advantage": 0.0,
            }
        )
    log.add(rows)
    log.finish()
    run_filter(
        FilterConfig(
            traces=str(tmp_path / "rollouts"), out=str(tmp_path / "verified"), verifier="math", lang=None, dedup="none"
        )
    )
    verdicts = pa.concat_tables(
        [read_stage(tmp_path / "verified" / "rejected"), read_stage(tmp_path / "verified")], promote_options="default"
    ).to_pylist()
    by_id = {v["id"]: v for v in verdicts}
    assert [by_id[f"q{i}"]["drop_reason"] for i in range(6)] == [None, "wrong", None, None, "wrong", "max_turns"]
    for i, reward in enumerate(rewards[:5]):
        assert reward == float(by_id[f"q{i}"]["correct"]), (endings[i], by_id[f"q{i}"])


def cli_train(*args):
    return CliRunner().invoke(cli, ["train", "--method", "grpo", *args])


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--tools", "search,serch", "--corpus", "CORPUS"],
            "tools: unknown tool 'serch'; expected one of search, python",
        ),
        (["--tools", "search", "--corpus", "CORPUS", "--max-turns", "0"], "max_turns: must be >= 1"),
        (["--tools", "search"], "tools: search needs a corpus (--corpus FILE"),
        (["--tools", "search", "--corpus", "MISSING"], "missing.jsonl"),
        (["--tools", "python", "--corpus", "CORPUS"], "only the search tool reads a corpus"),
        (["--tools", "search", "--corpus", "CORPUS", "--search-k", "0"], "search_k: must be >= 1"),
    ],
)
def test_bad_tool_settings_are_one_line_exit_2_nothing_written(flags, message, tool_student, task_files, tmp_path):
    corpus, prompts = task_files
    flags = [{"CORPUS": str(corpus), "MISSING": str(tmp_path / "missing.jsonl")}.get(f, f) for f in flags]
    result = cli_train("--student", tool_student, "--data", str(prompts), "--out", str(tmp_path / "out"), *flags)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


def test_a_template_without_tool_calls_is_one_line_exit_2_nothing_written(teacher_dir, task_files, tmp_path):
    """The arithmetic teacher's template renders no tool call: TRL could not run the loop, so nothing starts."""
    corpus, prompts = task_files
    result = cli_train(
        "--student",
        teacher_dir,
        "--data",
        str(prompts),
        "--out",
        str(tmp_path / "out"),
        "--tools",
        "search",
        "--corpus",
        str(corpus),
    )
    assert result.exit_code == 2, result.output
    assert "cannot render a tool call and its result" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_the_fingerprint_holds_the_tools_and_the_corpus_content(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "contents": "Favi Guges won the Kuge Prize in 1983."}) + "\n")
    base = dict(method="grpo", student="m", data="d", out="o")
    plain = TrainConfig(**base).fingerprinted()
    assert plain["tools"] is None and plain["corpus"] is None  # every setting, named or not (no history kept)
    tooled = TrainConfig(**base, tools="search", corpus=str(corpus), max_turns=4).fingerprinted()
    assert tooled["tools"] == "search" and tooled["max_turns"] == 4
    corpus.write_text(json.dumps({"id": "a", "contents": "Favi Guges won the Kuge Prize in 1984."}) + "\n")
    assert (
        TrainConfig(**base, tools="search", corpus=str(corpus), max_turns=4).fingerprinted()["corpus"]
        != tooled["corpus"]
    )
