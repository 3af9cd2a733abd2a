r"""Whole responses against labels, by class, in the style of other projects' math-grader tests
(open-r1's tests/test_rewards.py, Math-Verify's tests/test_all.py): a gold, a response, and whether
the response's final answer is the gold (1) or not (0). Written here, not copied; used by
tests/filters/math/test_peer_classes.py (ours against math-verify alone, class by class) and its sweep
of the fast paths.

A label-0 case is one where saying "correct" would be a false positive; an answer that cannot be
read (None) is never "correct".
"""

BOX_REPEATED = "\\boxed{7} " * 300 + "\\boxed{13}"

CASES = {
    # Issue 27 item 1: no box. Where math-verify's default parse looks: the last LaTeX expression
    # (an equation's right side), an "answer is" phrase, a bare last-line value, a last sentence's
    # one value. A prose answer naming two values, or none, is no answer.
    "no_box": [
        ("$35$", r"Choosing 3 of the 7 books: $\binom{7}{3} = 35$", 1),
        ("$4$", r"Since $2^4 = 16$, we get $\log_2(16) = 4$", 1),
        ("$9$", "Adding the two piles, the result is $9$", 1),
        ("$63$", "Multiply 7 by 9 first.\n63", 1),
        ("$45$", "The answer is 45 because 5 rows of 9 seats make 45.", 1),
        ("$\\frac{2}{3}$", "So the probability that Bo wins the game is 2/3.", 1),
        ("$120$", r"The volume is $6 \times 4 \times 5 = 120$.", 1),
        ("$12$", "Therefore, there are 12 distinct ways to seat them.", 1),
        ("$7$", "Answer: 7", 1),
        ("$-2$", "Solving the linear equation gives\n\\[ x = -2 \\]", 1),
        ("$\\sqrt{2}$", r"Thus the diagonal is \(\sqrt{2}\).", 1),
        ("$1,2$", r"The roots are $x = 1$ and $x = 2$.", 1),
        ("$34$", "Final Answer: The largest $n$ is 34.", 1),
        ("$3$", "Final Answer: The final answer is 3. I hope it is correct.", 1),
        ("$6$", "4 + 2 = 6", 1),
        ("$72$", "Natalia sold 48 + 24 = 72 clips in all.\n#### 72", 1),  # GSM8K's answer line
        ("$5$", "The answer is 3 or 5.", 0),
        ("$5$", "It could be either 3 or 5", 0),
        ("$3$", "It could be either 3 or 5", 0),
        ("$7$", "Adding the two piles, the result is $8$", 0),
        ("$63$", "Multiply 7 by 9 first.\n64", 0),
        ("$72$", "Natalia sold 48 + 24 = 72 clips in all.\n#### 71", 0),
        ("$4$", "I could not determine the answer.", 0),
        ("$6$", "The answer is unclear; it depends on n.", 0),
        ("$5$", r"Since $2^4 = 16$, we get $\log_2(16) = 4$", 0),
        ("$2$", "The answer is 45 because 2 rows of 9 seats and 27 more make 45.", 0),
    ],
    # Item 2: golds written as expressions or equations, read as math-verify's expression reader
    # means them (** is a power), never forced into $...$ (where 3**(1/2) reads as 3).
    "gold_not_latex": [
        ("3**(1/2)", r"So the side is \boxed{\sqrt{3}}.", 1),
        ("2**10", r"\boxed{1024}", 1),
        ("sqrt(5) + 1", r"\boxed{1+\sqrt{5}}", 1),
        ("pi/2", r"\boxed{\frac{\pi}{2}}", 1),
        ("2=x", r"\boxed{2}", 1),
        ("2=x", r"\boxed{x = 2}", 1),
        ("x = 2", r"\boxed{2}", 1),
        ("y = 7", r"So $\boxed{y = 7}$", 1),
        ("3**(1/2)", r"\boxed{3}", 0),
        ("2**10", r"\boxed{20}", 0),
        ("2=x", r"\boxed{3}", 0),
        ("pi/2", r"\boxed{\frac{\pi}{3}}", 0),
        ("sqrt(5) + 1", r"\boxed{\sqrt{5}}", 0),
    ],
    # Item 3: thousands separators, degrees, percent as a word, money.
    "separators_units": [
        ("$2345.6$", r"The total is \boxed{2\,345.6}.", 1),
        ("$12345.75$", r"\boxed{12{,}345.75}", 1),
        ("$1234567.5$", r"\boxed{1\,234\,567.5}", 1),
        ("$45^\\circ$", r"\boxed{45°}", 1),
        ("$45$", r"The angle is \boxed{45°}", 1),
        ("$60°$", r"\boxed{60^\circ}", 1),
        ("$0.0025$", r"\boxed{\frac{1}{4}\text{ percent}}", 1),
        ("$0.12$", r"\boxed{12\text{ percent}}", 1),
        ("\\$25", r"She pays \boxed{25} dollars.", 1),
        ("\\$18.50", r"\boxed{18.50}", 1),
        ("$25$", r"\boxed{\$25}", 1),
        ("$2345.6$", r"\boxed{2\,345.7}", 0),
        ("$0.25$", r"\boxed{\frac{1}{4}\text{ percent}}", 0),
        ("\\$25", r"\boxed{26}", 0),
        ("$45$", r"\boxed{46°}", 0),
        ("$2345$", r"\boxed{2\,34\,5}", 0),
    ],
    # Item 4: the last box wins after a run of repeated boxes; adjacent boxes of one answer set join.
    "last_box": [
        ("$13$", BOX_REPEATED, 1),
        ("$13$", "\\boxed{7}\n" * 250 + "\\boxed{13}", 1),
        ("$9$", r"\boxed{4}\boxed{4}\boxed{9}", 1),
        ("$1, 2$", r"The roots are \boxed{1}, \boxed{2}", 1),
        ("$(1, 2), (3, 4)$", r"$\boxed{(1, 2)}$ and $\boxed{(3, 4)}$", 1),
        ("$7$", BOX_REPEATED, 0),
        ("$4$", r"\boxed{4}\boxed{4}\boxed{9}", 0),
        ("$1$", r"The roots are \boxed{1}, \boxed{2}", 0),
    ],
}
