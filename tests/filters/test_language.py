"""Language consistency (R1's share of target-language words) on crafted traces with known shares.

Shares are counted by hand under filters/words.py's definition: letter runs in alphabetic scripts,
Chinese/Japanese characters at 1.5 per word, math/LaTeX/numbers no language's words.
"""

import pytest

from reasonkit.errors import UserError
from reasonkit.filters.base import apply
from reasonkit.filters.language import LanguageFilter, lang_ratio, lang_ratios
from reasonkit.filters.words import CJK_CHARS_PER_WORD, clean, runs

from ..helpers.synthetic import trace, traces_table

EN = "Let me compute the product of these two numbers first."  # 10 words
FR = "Alors nous calculons le produit de ces deux nombres."  # 9 words
DE = "Zuerst berechnen wir das Produkt der beiden Zahlen."  # 8 words
ES = "Primero calculamos el producto de los dos números."  # 8 words
RU = "Сначала вычислим произведение этих двух чисел."  # 6 words
ZH = "我们先来仔细计算这两个数的乘积。"  # 15 characters: 10 words
JA = "まず、二つの数の積を計算します。"  # kana: Japanese
KO = "먼저 두 수의 곱을 계산합니다."  # 5 words (Korean puts spaces between words)


def test_plain_english_is_one():
    assert lang_ratio("Okay, let me think about this. First we compute the product, then we check it.", "en") == 1.0


@pytest.mark.parametrize(
    "text,lang", [(EN, "en"), (FR, "fr"), (DE, "de"), (ES, "es"), (RU, "ru"), (ZH, "zh"), (JA, "ja"), (KO, "ko")]
)
def test_each_language_is_itself_and_not_english(text, lang):
    assert lang_ratio(text, lang) == 1.0
    if lang != "en":
        assert lang_ratio(text, "en") == 0.0


@pytest.mark.parametrize(
    "parts,share",
    [
        ((EN, FR), 10 / 19),
        ((EN, DE, ES), 10 / 26),
        ((FR, EN, RU), 10 / 25),
        ((EN, ZH), 10 / 20),
        ((EN, KO), 10 / 15),
    ],
)
def test_mixed_traces_score_their_share_of_english_words(parts, share):
    assert lang_ratio(" ".join(parts), "en") == pytest.approx(share)


def test_cjk_characters_count_by_the_documented_equivalence():
    # Five English words beside one 15-character Chinese sentence: 5 of 5 + 15/1.5 words, a third
    # (each character counted as a word made it 5/20).
    text = "Let me compute this now. " + ZH
    assert CJK_CHARS_PER_WORD == 1.5
    assert lang_ratio(text, "en") == pytest.approx(5 / 15)
    assert lang_ratio(text, "zh") == pytest.approx(10 / 15)


def test_math_symbols_outside_latex_are_not_words():
    # Unicode math written as text (25π, θ, α, ℝ, 𝑥) is nobody's language.
    text = (
        "The circle has area 25π, so the radius is 5. Let θ be the angle at the centre and α the "
        "angle at the rim, with x in ℝ and 𝑥 = 2; then θ = 2α by the inscribed angle theorem."
    )
    assert lang_ratio(text, "en") == 1.0
    f = LanguageFilter("en", 0.95)
    assert apply([f], traces_table([trace("a", reasoning=text)])).column("keep").to_pylist() == [True]


def test_short_runs_are_not_given_to_the_target():
    # Three two-word French sentences were each too short to judge and counted as English (1.0).
    assert lang_ratio("Donc x = 2. Alors y = 3. Puis z = 4.", "en") == 0.0
    assert lang_ratio("Donc x = 2. Alors y = 3. Puis z = 4.", "fr") == 1.0
    # A short run between long ones takes the verdict of the long run before it.
    assert lang_ratio(f"{FR} Wait. {FR}", "en") == 0.0
    assert lang_ratio(f"{EN} Donc. {EN}", "en") == 1.0


def test_english_short_sentences_stay_english():
    assert lang_ratio("Let me compute. So. Then add them. Plus.", "en") == 1.0
    assert lang_ratio("Wait. Hmm. Okay, so the answer is 12. Let me double check.", "en") == 1.0
    # Words other languages list as stopwords ("final" in Spanish, "plus" in French) do not make it foreign.
    assert lang_ratio("So the final answer is 42. Final answer. The total is 12, plus 3 gives 15.", "en") == 1.0
    assert lang_ratio("Die Antwort ist 12.", "en") == 0.0


def test_math_code_numbers_and_symbols_are_not_words():
    text = (
        r"We get $\frac{\alpha}{\beta} = 42$ and \[x^2\] then ```python\nprint('bonjour le monde')\n``` so 3 + 4 = 7."
    )
    assert "frac" not in clean(text) and "bonjour" not in clean(text)
    assert [w for _, ws in runs(text) for w in ws] == ["We", "get", "and", "then", "so"]
    assert lang_ratio(r"$$\int_0^1 x\,dx$$ 12345 + - * /", "en") is None  # nothing to judge


def test_a_verdict_is_remembered_per_run():
    cache: dict = {}
    first = lang_ratios([EN, FR, EN], "en", cache=cache)
    assert first == [1.0, 0.0, 1.0] and len(cache) == 2
    cache.update((key, "fr") for key in cache)  # the cache is what it reads back
    assert lang_ratios([EN], "en", cache=cache) == [0.0]


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
