"""Language consistency (R1's share of target-language words) on literal strings."""

import pytest

from reasonkit.errors import UserError
from reasonkit.filters.base import apply
from reasonkit.filters.language import LanguageFilter, clean, lang_ratio, runs
from reasonkit.filters.synthetic import trace, traces_table


def test_plain_english_is_one():
    assert lang_ratio("Okay, let me think about this. First we compute the product, then we check it.", "en") == 1.0


def test_math_code_numbers_and_symbols_are_not_words():
    text = r"We get $\frac{\alpha}{\beta} = 42$ and \[x^2\] then ```python\nprint('bonjour le monde')\n``` so 3 + 4 = 7."
    assert "frac" not in clean(text) and "bonjour" not in clean(text)
    assert [w for _, ws in runs(text) for w in ws] == ["We", "get", "and", "then", "so"]
    assert lang_ratio(r"$$\int_0^1 x\,dx$$ 12345 + - * /", "en") is None  # nothing to judge


def test_cjk_characters_count_as_words():
    # 4 English words, 4 Chinese characters: half the words are not English.
    assert lang_ratio("Let me compute this. 我们计算", "en") == 0.5
    assert lang_ratio("我们计算 this product now", "zh") == pytest.approx(4 / 7)
    assert lang_ratio("首先我们计算乘积。", "zh") == 1.0


def test_script_decides_when_only_one_candidate_uses_it():
    assert lang_ratio("まず、積を計算します。", "ja") == 1.0  # kana: Japanese, Han with it too
    assert lang_ratio("まず、積を計算します。", "zh") == 0.0
    assert lang_ratio("Сначала вычислим произведение", "ru") == 1.0
    assert lang_ratio("Сначала вычислим произведение", "en") == 0.0


def test_a_french_paragraph_in_english_reasoning():
    text = ("Okay, let me think about the problem. Alors nous calculons le produit de ces deux nombres. "
            "Then we add them all up together.")
    ratio = lang_ratio(text, "en")
    assert 0.4 < ratio < 0.7


def test_short_runs_get_the_benefit_of_the_doubt():
    # "Let me compute" alone looks German to a detector; three-word runs are judged, and unsure ones count.
    assert lang_ratio("Let me compute. So. Then add them. Plus.", "en") == 1.0


def test_unknown_language_code_is_a_user_error():
    with pytest.raises(UserError, match="unknown language code 'xx'"):
        LanguageFilter("xx")
    with pytest.raises(UserError, match="unknown language code 'zz'"):
        LanguageFilter("en", candidates=("fr", "zz"))


def test_filter_drops_mixed_and_records_ratio():
    rows = [
        trace("a", reasoning="Let me compute the product of the two numbers carefully."),
        trace("b", reasoning="Let me compute. 然后我们计算这两个数的乘积并检查结果。"),
        trace("c", reasoning=None, completion="Just the answer: </think>4", response="4"),
    ]
    out = apply([LanguageFilter("en", 0.95)], traces_table(rows))
    assert out.column("drop_reason").to_pylist() == [None, "language", None]
    ratios = out.column("lang_ratio").to_pylist()
    assert ratios[0] == 1.0 and ratios[1] < 0.5 and ratios[2] == 1.0  # no reasoning: the completion
