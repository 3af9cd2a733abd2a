"""The fresh student the on-policy tests distil into."""

import pytest

from reasonkit.recipes.teachers.student import StudentConfig, init_student


@pytest.fixture(scope="session")
def student(teacher_dir, tmp_path_factory):
    """A fresh random-init student with the teacher's tokenizer (recipes/teachers/student.py)."""
    out = tmp_path_factory.mktemp("student") / "student"
    return init_student(StudentConfig(tokenizer=teacher_dir, out=str(out)))["model"]
