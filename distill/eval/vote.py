r"""cons@k's vote: a problem's extracted answers grouped by the verifier's equivalence, then counted.

``\frac12``, ``\dfrac{1}{2}`` and ``0.5`` are one answer to math-verify, so they are one vote.

Grouping rule, in sample order: an answer joins the first group whose *first member* the verifier
calls equal to it (``verify(gold=first member, pred=answer)``), else it starts a group. Comparing
with the first member, not with any member, keeps the groups well defined although math
equivalence with tolerances need not be transitive. A pair the verifier cannot decide (``None``:
a timeout, an unparseable side) is not equal. A group is named by its first member's sample number.

Winner (:func:`reasonkit.distill.eval.metrics.majority` over the group names): the largest group; a tie
goes to the group whose first member comes earliest in sample order.

Cost: answers with the same text, and integers of the same value, are grouped here without the
verifier; two different integers are never equal and are not sent. Every other pair goes to the
Verifier (math-verify in its process pool), in rounds: round r compares, for every problem at once,
the first still-ungrouped answer with the problem's other ungrouped answers. Rounds = the most
groups any problem has; no pair is sent twice.

>>> same = lambda pairs: [{a, b} == {"1/2", "0.5"} for a, b in pairs]
>>> vote_groups([["3", "1/2", "0.5", "03", None]], same)
[[0, 1, 1, 0, None]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Same = Callable[[list[tuple[str, str]]], list[bool]]


def answer_key(pred: str) -> str:
    """Answers that are equal without asking the verifier: integers by value (``042`` = ``42.0``
    = ``42``), others by their text without spaces and dollar signs.

    >>> answer_key("042"), answer_key(" $\\\\frac{1}{2}$ ")
    ('42', '\\\\frac{1}{2}')
    """
    from reasonkit.filters.math.verify import parse_int

    value = parse_int(pred)
    return str(value) if value is not None else "".join(pred.split()).strip("$")


def vote_groups(problems: Sequence[Sequence[str | None]], same: Same) -> list[list[int | None]]:
    """For each problem's answers (in sample order), each answer's group: the position of the
    group's first member, or None for a sample without an answer.

    ``same(pairs)`` says for a batch of ``(answer, first member)`` pairs whether they are equal;
    it is called once per round with the pairs of every problem.
    """
    from reasonkit.filters.math.verify import parse_int

    groups: list[list[int | None]] = [[None] * len(answers) for answers in problems]
    # per problem, the answers still ungrouped as classes of equal keys: [positions], in order
    pending: list[list[list[int]]] = []
    for answers in problems:
        classes: dict[str, list[int]] = {}
        for j, answer in enumerate(answers):
            if answer is not None:
                classes.setdefault(answer_key(answer), []).append(j)
        pending.append(list(classes.values()))
    while any(pending):
        pairs: list[tuple[str, str]] = []
        asked: list[tuple[int, int]] = []  # (problem, index into its remaining classes)
        for p, classes in enumerate(pending):
            if not classes:
                continue
            lead = classes[0]
            for j in lead:
                groups[p][j] = lead[0]
            first = problems[p][lead[0]]
            first_is_int = parse_int(first) is not None
            for c, members in enumerate(classes[1:]):
                answer = problems[p][members[0]]
                if first_is_int and parse_int(answer) is not None:
                    continue  # two different integers
                pairs.append((answer, first))
                asked.append((p, c))
        joined = {where for where, equal in zip(asked, same(pairs) if pairs else []) if equal}
        for p, classes in enumerate(pending):
            if not classes:
                continue
            rest = []
            for c, members in enumerate(classes[1:]):
                if (p, c) in joined:
                    for j in members:
                        groups[p][j] = classes[0][0]
                else:
                    rest.append(members)
            pending[p] = rest
    return groups


def verifier_same(verifier) -> Same:
    """``same`` through a :class:`reasonkit.filters.math.verify.Verifier`: True only when it says True."""
    return lambda pairs: [verdict is True for verdict, _ in verifier.check(pairs)]
