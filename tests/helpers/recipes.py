"""What the shipped-recipe tests need to know about the recipes."""

# Recipes that start from another recipe's output: the tests point them at a model that exists here.
READS_ANOTHER_RUN = {"step-dpo.yaml": ["sft_student.model={teacher}"]}  # runs/quickstart/sft/model


def overrides_for(path, teacher_dir: str) -> list[str]:
    """The ``--set`` overrides a shipped recipe needs to validate on a machine that has not run its source recipe."""
    return [o.format(teacher=teacher_dir) for o in READS_ANOTHER_RUN.get(path.name, [])]
