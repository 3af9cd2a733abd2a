"""Student and teacher must share a vocabulary: checked on their tokenizers and configs, before any weight loads.

On-policy distillation compares the two next-token distributions id by id (TRL's generalized JSD over the
vocabulary, or the served teacher's top-k ids), so token 1234 must be the same string for both; a
mismatch trains the student towards the wrong tokens while the loss falls. TRL checks only the models'
``vocab_size``, once both are loaded; this check reads tokenizer files and config.json only, and says
which ids differ, in one line.

>>> vocabulary_mismatch({0: "<pad>", 1: "a", 2: "b"}, {0: "<pad>", 1: "a", 2: "c", 3: "d"}, "S", "T")
"the student S's tokenizer (3 tokens) and the teacher T's (4 tokens) differ: first differing ids 2 ('b' vs 'c'), 3 (none vs 'd'); on-policy distillation compares their next-token distributions id by id, so they must share a vocabulary"
>>> vocabulary_mismatch({0: "a"}, {0: "a"}, "S", "T") is None
True
"""  # noqa: E501

from __future__ import annotations

from reasonkit.errors import UserError

#: Differing ids a message names.
SHOWN = 3


def check_vocabulary(cfg) -> None:
    """One UserError line (exit 2) when the student and the teacher (``cfg.teacher``, or the model served at
    ``cfg.teacher_url``) do not share a vocabulary; nothing is loaded but tokenizers and configs."""
    student = _tokenizer(cfg.student, "student")
    if cfg.teacher_url:
        from reasonkit.distill.onpolicy.served import check_served_vocabulary

        check_served_vocabulary(student, cfg.student, cfg.teacher_url)
        return
    teacher = _tokenizer(cfg.teacher, "teacher")
    why = vocabulary_mismatch(_by_id(student), _by_id(teacher), cfg.student, cfg.teacher)
    if why is None:
        sizes = _vocab_size(cfg.student, "student"), _vocab_size(cfg.teacher, "teacher")
        if None not in sizes and sizes[0] != sizes[1]:
            why = (
                f"the student {cfg.student} has {sizes[0]} embedding rows (config vocab_size) and the teacher "
                f"{cfg.teacher} {sizes[1]}: their tokenizers agree, but TRL's DistillationTrainer compares the whole "
                "next-token distributions and needs the same vocab_size"
            )
    if why:
        raise UserError(why)


def vocabulary_mismatch(student: dict[int, str], teacher: dict[int, str], student_name, teacher_name) -> str | None:
    """Why two vocabularies (id -> token) differ, naming the first differing ids; None when they are the same."""
    differing = [i for i in sorted(student.keys() | teacher.keys()) if student.get(i) != teacher.get(i)]
    if not differing:
        return None

    def shown(token):
        return "none" if token is None else repr(token)

    first = ", ".join(f"{i} ({shown(student.get(i))} vs {shown(teacher.get(i))})" for i in differing[:SHOWN])
    return (
        f"the student {student_name}'s tokenizer ({len(student)} tokens) and the teacher {teacher_name}'s "
        f"({len(teacher)} tokens) differ: first differing ids {first}; on-policy distillation compares their "
        "next-token distributions id by id, so they must share a vocabulary"
    )


def _tokenizer(name: str, role: str):
    from transformers import AutoTokenizer

    from reasonkit.distill.data import model_ref

    try:
        return AutoTokenizer.from_pretrained(model_ref(name))
    except (OSError, ValueError) as e:
        raise UserError(f"{name}: cannot load the {role}'s tokenizer ({str(e).splitlines()[0]})") from None


def _by_id(tok) -> dict[int, str]:
    """The tokenizer's whole vocabulary, added tokens included, as id -> token string."""
    return {i: token for token, i in tok.get_vocab().items()}


def _vocab_size(name: str, role: str) -> int | None:
    from transformers import AutoConfig

    from reasonkit.distill.data import model_ref

    try:
        config = AutoConfig.from_pretrained(model_ref(name))
    except (OSError, ValueError) as e:
        raise UserError(f"{name}: cannot load the {role}'s config ({str(e).splitlines()[0]})") from None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return getattr(text, "vocab_size", None)
