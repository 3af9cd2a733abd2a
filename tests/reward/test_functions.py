r"""GRPO rewards (reward/functions.py): literal strings, hostile inputs, and agreement with the real filter.

The agreement tests run the filter's own VerifyFilter / FormatFilter / LanguageFilter over a traces
table and ask the rewards about the same completions, passed as TRL passes them (rendered or
conversational prompts, completion strings or message lists, completion_ids): row by row, the
reward is the filter's verdict.
"""

import pickle
import subprocess
import sys
import time

import pytest

from reasonkit.errors import UserError
from reasonkit.filters.base import apply
from reasonkit.filters.format import FormatFilter
from reasonkit.filters.language import LanguageFilter
from reasonkit.filters.math.arithmetic import claims, score
from reasonkit.filters.math.verify import VerifyFilter
from reasonkit.recipes.tasks import math as task
from reasonkit.reward import functions as R

from ..helpers.synthetic import synthetic_rows, trace, traces_table

LIMIT = 4096  # max_completion_length of the rewards under test
TIMEOUT = 1.0  # seconds per answer in the verifier's pool
ALL = {name: 1.0 for name in R.NAMES}
Q = "Compute 17 x 23"
OPEN_PROMPT = "<|User|>Compute 17 x 23<|Assistant|><think>\n"  # a template that opens the think block


@pytest.fixture(scope="module")
def fns():
    """Every reward, by name, with a short verifier timeout; the math pool started once here."""
    funcs, _ = R.make_rewards(ALL, max_completion_length=LIMIT, verify_timeout=TIMEOUT)
    by_name = {f.__name__: f for f in funcs}
    assert by_name["accuracy"]([Q], [r"\boxed{\frac{2}{4}}"], answer=[r"\frac{1}{2}"]) == [1.0]  # pool is up
    yield by_name
    R.close()


def call(f, completions, answers=None, prompts=None, ids=None):
    prompts = prompts if prompts is not None else [Q] * len(completions)
    answers = answers if answers is not None else ["391"] * len(completions)
    ids = ids if ids is not None else [[0] * 50 for _ in completions]
    tests = ['{"inputs": ["2 3"], "outputs": ["6"]}'] * len(completions)  # the code reward's column
    return f(prompts, completions, ids, answer=answers, tests=tests)


# -- accuracy --------------------------------------------------------------------------------------


def test_accuracy_right_wrong_no_answer_and_cannot_tell(fns):
    completions = [
        r"<think>17 * 23 = 391</think>The answer is \boxed{391}.",
        r"<think>17 * 23 = 381</think>The answer is \boxed{381}.",
        r"<think>17 * 23 = 391</think>The answer is 391 or 392, I think",  # two values: no answer (issue 27)
        r"<think>17 * 23 = \boxed{391}</think>So that is it.",  # a box in the reasoning is no answer
        r"<think>ok</think>\boxed{391",  # a torn box
        r"<think>ok</think>\boxed{\frac{782}{2}}",  # math-verify: equal
        r"<think>ok</think>\boxed{391}",  # no gold
        r"<think>ok</think>\boxed{" + "\x00" + "}",  # math-verify cannot parse it
    ]
    answers = ["391"] * 6 + [None, "391"]
    assert call(fns["accuracy"], completions, answers) == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, None, None]


def test_accuracy_with_the_integer_verifier_says_none_for_non_integers():
    (acc,), _ = R.make_rewards({"accuracy": 1.0}, max_completion_length=LIMIT, verifier="int")
    assert acc(
        [Q] * 3, [r"</think>\boxed{391}", r"</think>\boxed{4.5}", r"</think>\boxed{390}"], answer=["391", "391", "391"]
    ) == [1.0, None, 0.0]


def test_unclosed_think_and_truncation_have_no_answer(fns):
    acc = fns["accuracy"]
    # Unclosed: everything is reasoning, the response is empty.
    assert call(acc, [r"<think>17 * 23 = 391 so \boxed{391}"]) == [0.0]
    # The prompt opened the block: a closing tag alone closes it, no tag at all is a cut-off thought.
    assert call(
        acc, [r"17 * 23 = 391</think>\boxed{391}", r"17 * 23 = 391 so \boxed{391}"], prompts=[OPEN_PROMPT] * 2
    ) == [1.0, 0.0]
    # The same completions without the open prompt: no think block, the whole text is the response.
    assert call(acc, [r"17 * 23 = 391 so \boxed{391}"]) == [1.0]
    # Cut at the limit (no EOS in the last position) has no answer, as in evaluation; one that ends
    # on its last allowed token with EOS is judged when the EOS ids are known.
    done = r"<think>17 * 23 = 391</think>\boxed{391}"
    assert call(acc, [done, done], ids=[[5] * LIMIT, [5] * (LIMIT - 1)]) == [0.0, 1.0]
    (acc_eos,), _ = R.make_rewards({"accuracy": 1.0}, max_completion_length=LIMIT, eos_token_ids=[2])
    assert acc_eos([Q] * 2, [done, done], [[5] * (LIMIT - 1) + [2], [5] * LIMIT], answer=["391"] * 2) == [1.0, 0.0]
    # The module-level function knows no limit: it judges the text.
    assert R.accuracy_reward([Q], [done], [[5] * LIMIT], answer=["391"]) == [1.0]


def test_conversational_completions_and_prefill_flag(fns):
    text = r"17 * 23 = 391</think>\boxed{391}"
    messages = [{"role": "user", "content": Q}]
    assert call(fns["accuracy"], [[{"role": "assistant", "content": text}]], prompts=[messages]) == [1.0]
    # An assistant prefill that opens the block, in a conversational prompt, opens it too.
    cut = r"17 * 23 = 391 \boxed{391}"
    prefill = messages + [{"role": "assistant", "content": "<think>\n"}]
    assert call(fns["accuracy"], [[{"role": "assistant", "content": cut}]], prompts=[prefill]) == [0.0]
    assert call(fns["accuracy"], [[{"role": "assistant", "content": cut}]], prompts=[messages]) == [1.0]
    (acc,), _ = R.make_rewards({"accuracy": 1.0}, max_completion_length=LIMIT, prefilled=True)
    assert acc([messages], [[{"role": "assistant", "content": cut}]], answer=["391"]) == [0.0]
    # A response parser's reasoning_content is put back as the think block.
    parsed = [{"role": "assistant", "content": r"\boxed{391}", "reasoning_content": "17 * 23 = 391"}]
    assert R.completion_text(parsed) == "<think>\n17 * 23 = 391\n</think>\n\n\\boxed{391}"
    assert call(fns["format"], [parsed], prompts=[messages]) == [1.0]


def test_missing_answer_column_is_one_clear_error():
    with pytest.raises(UserError, match="'answer' column"):
        R.accuracy_reward([Q], [r"\boxed{391}"], None)
    (cosine,), _ = R.make_rewards({"cosine": 1.0}, max_completion_length=LIMIT)
    with pytest.raises(UserError, match="'answer' column"):
        cosine([Q], [r"\boxed{391}"], [[1]])


# -- format ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion,expected",
    [
        (r"<think>17 * 23 = 391</think>\boxed{391}", 1.0),
        ("<think>\n17 * 23 = 391\n</think>\n\nThe answer is $\\boxed{391}$.\n", 1.0),
        ("<think>\r\n17 * 23 = 391\r\n</think>\r\n\r\n\\boxed{391}\r\n", 1.0),
        ("\n\n<think>17 * 23 = 391</think>\n\n\n\\boxed{ 391 }\n\n", 1.0),  # open-r1's regex gave 0 here
        (r"<think>17 * 23 = \boxed{391}</think>\boxed{391}", 1.0),  # a box in the reasoning is reasoning
        (r"<think>ok</think>\boxed{3} or \boxed{391}", 0.0),  # two boxes
        (r"<think>ok</think>\boxed{3}. Then \boxed{391}", 0.0),  # two boxes, the first one intermediate
        (r"<think>17 * 23 = 391 \boxed{391}", 0.0),  # unclosed think
        (r"17 * 23 = 391, \boxed{391}", 0.0),  # no think block
        (r"<think>ok</think>The answer is 391.", 0.0),  # no box
        (r"<think>ok</think>\boxed{391", 0.0),  # torn box
        (r"<think>ok</think>\boxed{}", 0.0),  # empty box
        (r"<think>ok</think>", 0.0),  # empty response
        ("<think>" + "wait let me check that again " * 40 + r"</think>\boxed{391}", 0.0),  # repetitive
    ],
)
def test_format_on_literal_strings(fns, completion, expected):
    assert call(fns["format"], [completion]) == [expected]
    assert call(fns["format"], [[{"role": "assistant", "content": completion}]]) == [expected]


def test_format_with_an_open_prompt_and_truncation(fns):
    fmt = fns["format"]
    assert call(fmt, [r"17 * 23 = 391</think>\boxed{391}", "17 * 23 = 391"], prompts=[OPEN_PROMPT] * 2) == [1.0, 0.0]
    assert call(fmt, [r"<think>ok</think>\boxed{391}"], ids=[[1] * LIMIT]) == [0.0]


# -- language --------------------------------------------------------------------------------------


def test_language_is_the_filters_ratio_over_the_chain_of_thought(fns):
    lang = fns["language"]
    english = "Let me compute the product first. Then I add the carry."
    mixed = "Let me compute this now. 我们先来仔细计算这两个数的乘积。"  # 5 English words of 15 (language.py)
    out = call(
        lang,
        [
            f"<think>{english}</think>\\boxed{{391}}",
            f"<think>{mixed}</think>\\boxed{{391}}",
            r"<think>$$17 \cdot 23 = 391$$</think>\boxed{391}",  # no words to judge
            f"<think>{english}</think>我们先来仔细计算这两个数的乘积。",
        ],
    )  # the response is not judged
    assert out[0] == 1.0 and out[1] == pytest.approx(5 / 15) and out[2] is None and out[3] == 1.0
    # Without a think block the whole completion is the chain of thought, as in the filter.
    assert call(lang, [mixed])[0] == pytest.approx(5 / 15)
    (zh,), _ = R.make_rewards({"language": 1.0}, max_completion_length=LIMIT, lang="zh")
    assert zh([Q], [f"<think>{mixed}</think>"], [[1]], answer=["1"])[0] == pytest.approx(10 / 15)


# -- length and cosine -----------------------------------------------------------------------------


def test_soft_overlong_follows_dapo():
    (length,), _ = R.make_rewards({"length": 1.0}, max_completion_length=100, overlong_cache=20)
    out = length([Q] * 5, ["x"] * 5, [[1] * n for n in (10, 80, 90, 100, 101)])
    assert out == [0.0, 0.0, -0.5, -1.0, -1.0]
    (default,), _ = R.make_rewards({"length": 1.0}, max_completion_length=100)
    assert default([Q], ["x"], [[1] * 90]) == [-0.5]  # cache: a fifth of the limit, as DAPO's 4k of 20k
    with pytest.raises(UserError, match="max_completion_length"):
        R.soft_overlong_reward([Q], ["x"], [[1]])


def test_cosine_prefers_short_right_and_long_wrong_as_trl_does(fns):
    from trl.rewards import get_cosine_scaled_reward

    right, wrong = r"<think>ok</think>\boxed{391}", r"<think>ok</think>\boxed{390}"
    ids = [[1] * n for n in (0, LIMIT // 2, LIMIT - 1)] * 2  # (at LIMIT it is cut: no answer, wrong)
    completions = [right] * 3 + [wrong] * 3
    ours = call(fns["cosine"], completions, ids=ids)
    assert ours[0] > ours[1] > ours[2] and ours[5] > ours[4] > ours[3]
    assert ours[0] == pytest.approx(1.0) and ours[2] == pytest.approx(0.5)
    assert ours[3] == pytest.approx(-1.0) and ours[5] == pytest.approx(-0.5)
    trl = get_cosine_scaled_reward(LIMIT)([[{"content": c}] for c in completions], ["391"] * 6, ids)
    assert ours == pytest.approx(trl)
    assert call(fns["cosine"], [right], answers=[None]) == [None]
    assert call(fns["cosine"], [right], ids=[[1] * LIMIT]) == [pytest.approx(-0.5)]  # truncated


# -- arithmetic ------------------------------------------------------------------------------------


def test_arithmetic_on_the_tasks_worked_solution(fns):
    problem = "Find the remainder when 37 * 48 is divided by 1000."
    good = task.solution(problem)
    assert score(good) == (8, 8)  # every "=" link of every line
    slip = good.replace("= 52 + 5 = 57", "= 52 + 5 = 58")  # one slip; the lines after it follow from it
    wrong_mod = good.replace("1776 mod 1000 = 776", "1776 mod 1000 = 766")
    out = call(fns["arithmetic"], [good, slip, wrong_mod, r"<think>Let me think.</think>\boxed{776}"])
    assert out == [1.0, 7 / 8, 7 / 8, None]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("3 * 8 + 7 * 4 + 5 = 24 + 28 + 5 = 52 + 5 = 57", [True, True, True]),
        ("so 12 + 5 = 18, then", [False]),
        ("1776 mod 1000 = 776", [True]),
        (r"$3 \times (4 + 1) = 15$ and \(2 \cdot 3 = 6\)", [True, True]),
        ("2(3 + 4) = 14, and -3 + 5 = 2", [True, True]),
        ("1,776 + 1 = 1,777", [True]),
        ("The sum 3 + 4\n= 7", [True]),
        ("x^2 + 3 = 7; 2x + 3 = 7; x - 3 = 4; f(3) = 9; 3.5 + 1 = 4.5; 1/2 + 1/2 = 1; 3! = 6", []),
        ("x = 5, 10 = 10", []),  # no side does arithmetic
        ("5 mod 0 = 1", []),
        ("9" * 51 + " + 1 = 1", []),  # operands past MAX_DIGITS are not read
    ],
)
def test_arithmetic_claims(text, expected):
    assert [ok for _, _, ok in claims(text)] == expected


# -- hostile inputs --------------------------------------------------------------------------------

HOSTILE = {
    "megabyte": "7" * 1_000_000,
    "nested_braces": "{" * 10_000 + "}" * 10_000,
    "tower": "5^(5^(5^5))",
    "latex_tower": "9^{9^{9}}",
    "megabyte_arithmetic": "1+1=2 " * 170_000,
    "deep_parens": "(" * 10_000 + "1" + ")" * 10_000 + " = 1 + 0",
    "lone_surrogate": "\ud800" + "1 + 1 = 2",
}


@pytest.mark.parametrize("name", R.NAMES)
def test_each_reward_returns_within_the_timeout_on_hostile_input(fns, name):
    completions = [f"<think>{x}</think>The answer is \\boxed{{{x}}}." for x in HOSTILE.values()]
    completions += [f"<think>{x}" for x in HOSTILE.values()]  # unclosed, a megabyte of reasoning
    start = time.perf_counter()
    out = call(fns[name], completions, answers=["5"] * len(completions), ids=[[1] * 100 for _ in completions])
    elapsed = time.perf_counter() - start
    assert len(out) == len(completions)
    assert all(r is None or -1.0 <= r <= 1.0 for r in out)
    if name in ("accuracy", "cosine"):
        assert all(r != 1.0 for r in out)  # never "correct"
        assert out[list(HOSTILE).index("latex_tower")] is None  # the pool's deadline: cannot tell
    # One stuck answer costs one timeout (the pool kills it); everything else is bounded work.
    assert elapsed < TIMEOUT + 3.0, f"{name}: {elapsed:.2f} s"


# -- agreement with the filter ---------------------------------------------------------------------

TWO_BOXES = {"two-boxes"}


def _agreement_rows() -> list[dict]:
    rows = synthetic_rows(6, "int", samples=4, seed=1, wrong=0.4)
    rows += synthetic_rows(2, "latex", samples=2, seed=1, wrong=0.5)
    lit = [
        trace("right", response=r"The answer is \boxed{4}."),
        trace("wrong", response=r"The answer is \boxed{5}."),
        trace("no-box", response="It is four."),
        trace("no-gold", answer=None),
        trace("unverifiable", response=r"\boxed{" + "\x01" + "}"),
        trace("two-boxes", response=r"\boxed{3} or \boxed{4}"),
        trace(
            "unclosed",
            completion=r"<think>2 + 2 = 4 so \boxed{4}",
            reasoning=r"2 + 2 = 4 so \boxed{4}",
            response="",
            finish_reason="length",
            tokens=LIMIT,
        ),
        trace(
            "unclosed-stopped",
            completion=r"<think>2 + 2 = 4 so \boxed{4}",
            reasoning=r"2 + 2 = 4 so \boxed{4}",
            response="",
        ),
        trace("truncated-after-box", finish_reason="length", tokens=LIMIT),
        trace("no-think", reasoning=None, response=r"2 + 2 = 4, so \boxed{4}."),
        trace("prefilled", completion=r"2 + 2 = 4</think>\boxed{4}", reasoning="2 + 2 = 4", response=r"\boxed{4}"),
        trace(
            "prefilled-cut",
            completion="2 + 2 is",
            reasoning="2 + 2 is",
            response="",
            finish_reason="length",
            tokens=LIMIT,
        ),
        trace("mixed-language", reasoning="Let me compute this now. 我们先来仔细计算这两个数的乘积。"),
        trace("french", reasoning="Donc x = 2. Alors y = 3. Puis nous calculons le produit de ces deux nombres."),
        trace("no-words", reasoning=r"$$2 + 2 = 4$$"),
        trace(
            "newlines",
            completion="<think>\n2 + 2 = 4\n</think>\n\n\\boxed{4}\n",
            reasoning="2 + 2 = 4",
            response="\\boxed{4}",
        ),
    ]
    return rows + lit


def _prompt(row: dict):
    """The prompt as TRL would hold it: prefilled rows' template opened the think block."""
    text = row["messages"][0]["content"]
    return f"<|User|>{text}<|Assistant|><think>\n" if row["id"].startswith("prefilled") else text


def test_rewards_equal_the_filters_verdicts_row_by_row(fns):
    rows = _agreement_rows()
    table = traces_table(rows)
    verify = VerifyFilter("math", timeout=TIMEOUT, workers=1)
    try:
        verdicts = apply([verify], table)
    finally:
        verify.close()
    formatted = apply([FormatFilter(**R.format_options())], table)
    language = apply([LanguageFilter("en")], table)

    prompts = [_prompt(r) for r in rows]
    ids = [[7] * r["completion_tokens"] for r in rows]
    answers = [r["answer"] for r in rows]
    for completions in (
        [r["completion"] for r in rows],
        [[{"role": "assistant", "content": r["completion"]}] for r in rows],
    ):
        acc = fns["accuracy"](prompts, completions, ids, answer=answers)
        fmt = fns["format"](prompts, completions, ids, answer=answers)
        lang = fns["language"](prompts, completions, ids, answer=answers)
        for i, row in enumerate(rows):
            reason = verdicts.column("drop_reason")[i].as_py()
            expected = {None: 1.0, "wrong": 0.0, "no_answer": 0.0, "no_gold": None, "unverifiable": None}[reason]
            if row["finish_reason"] == "length" and reason != "no_gold":
                expected = 0.0  # truncated: no answer, as evaluation scores it
            assert acc[i] == expected, (row["id"], reason, acc[i])
            keep = formatted.column("keep")[i].as_py()
            assert fmt[i] == float(keep and row["id"] not in TWO_BOXES), (
                row["id"],
                formatted.column("drop_reason")[i],
            )
            ratio = language.column("lang_ratio")[i].as_py()
            assert (lang[i] is None) == (ratio is None) and (
                ratio is None or lang[i] == pytest.approx(ratio, abs=1e-6)
            )
    # The table covers every verdict the rewards map.
    assert set(verdicts.column("drop_reason").to_pylist()) == {None, "wrong", "no_answer", "no_gold", "unverifiable"}
    assert {"truncated", "unclosed_think", "no_think", "no_boxed", None} <= set(
        formatted.column("drop_reason").to_pylist()
    )
    ratios = language.column("lang_ratio").to_pylist()
    assert None in ratios and 0.0 in ratios and any(r is not None and 0.0 < r < 1.0 for r in ratios)


# -- make_rewards ----------------------------------------------------------------------------------


def test_make_rewards_names_weights_and_pickles():
    funcs, weights = R.make_rewards({"accuracy": 1.0, "format": 0.2, "arithmetic": 0.5}, max_completion_length=64)
    assert [f.__name__ for f in funcs] == ["accuracy", "format", "arithmetic"] and weights == [1.0, 0.2, 0.5]
    assert set(R.REWARDS) == set(R.NAMES) and R.REWARDS["length"] is R.soft_overlong_reward
    # TRL pickles reward functions to its async rollout worker: a copy gives the same rewards.
    text = [r"<think>2 * 3 = 6</think>\boxed{6}"]
    for f in funcs:
        copy = pickle.loads(pickle.dumps(f))
        assert copy.__name__ == f.__name__ and copy(["q"], text, [[1]], answer=["6"]) == f(
            ["q"], text, [[1]], answer=["6"]
        )


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            {"weights": {"accuracy": 1.0, "speed": 1.0}},
            "unknown reward 'speed'; expected one of accuracy, format, language, length, cosine, arithmetic, code",
        ),
        ({"weights": {}}, "no reward asked for"),
        ({"weights": {"format": "high"}}, "reward format: the weight must be a finite number"),
        ({"weights": {"format": float("nan")}}, "the weight must be a finite number"),
        ({"max_completion_length": 0}, "max_completion_length must be a positive integer"),
        ({"verifier": "sympy"}, "unknown verifier 'sympy'"),
        ({"overlong_cache": 1000}, r"overlong_cache must be within \[1, max_completion_length=64\]"),
        ({"weights": {"language": 1.0}, "lang": "xx"}, "unknown language code 'xx'"),
    ],
)
def test_make_rewards_refuses_bad_input_in_one_line(kwargs, message):
    args = {"weights": {"accuracy": 1.0}, "max_completion_length": 64, **kwargs}
    with pytest.raises(UserError, match=message) as e:
        R.make_rewards(args.pop("weights"), **args)
    assert "\n" not in str(e.value)


def test_importing_the_rewards_imports_nothing_heavy():
    heavy = ("numpy", "pyarrow", "lingua", "math_verify", "sympy", "torch", "trl")
    code = f"import sys, reasonkit.reward.functions; print([m for m in {heavy!r} if m in sys.modules])"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )


def test_cost_of_a_grpo_step_of_the_synthetic_task(fns):
    """64 completions (8 prompts x G 8) of the synthetic task through all six rewards, warm: the issue
    wants rewards under 2% of a ~1.9 s GRPO step (38 ms); measured ~8 ms (bench/rewards.py)."""
    problems = task.make_problems(8, seed=0, variant="aime")
    prompts, completions, answers = [], [], []
    for p in problems:
        for g in range(8):
            text = task.solution(p)
            if g % 3 == 0:
                text = text.replace("boxed{", "boxed{9", 1)
            prompts.append([{"role": "user", "content": task.user_content(p["problem"])}])
            completions.append([{"role": "assistant", "content": text}])
            answers.append(p["answer"])
    ids = [[1] * (60 + i) for i in range(64)]
    timed = [f for name, f in fns.items() if name != "code"]  # the code reward runs programs: bench/code.py
    for f in timed:  # warm: lingua's detector, TRL's import
        f(prompts, completions, ids, answer=answers)
    start = time.perf_counter()
    for f in timed:
        out = f(prompts, completions, ids, answer=answers)
        assert len(out) == 64
    elapsed = time.perf_counter() - start
    assert fns["accuracy"](prompts[:3], completions[:3], ids[:3], answer=answers[:3]) == [0.0, 1.0, 1.0]
    assert elapsed < 0.2, f"all six rewards took {elapsed * 1000:.0f} ms for 64 completions"
