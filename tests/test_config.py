from dataclasses import dataclass, field
from typing import Literal

import pytest

from reasonkit.config import from_dict, load_yaml, override
from reasonkit.errors import UserError


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.6
    n: int = 8


@dataclass(frozen=True)
class Stage:
    verify: Literal["math", "int", "none"] = "math"
    decontam: tuple[str, ...] = ()
    sampling: Sampling = field(default_factory=Sampling)
    limit: int | None = None


def test_nested_dicts_become_frozen_dataclasses():
    cfg = from_dict(Stage, {"verify": "int", "sampling": {"n": 4}, "decontam": "aime.parquet"}, "filter")
    assert cfg == Stage(verify="int", sampling=Sampling(n=4), decontam=("aime.parquet",))
    with pytest.raises(Exception):
        cfg.verify = "none"  # frozen


@pytest.mark.parametrize(
    "data, message",
    [
        ({"verifyy": "int"}, "filter.verifyy: unknown key; did you mean verify?"),
        ({"sampling": {"tempreature": 1}}, "filter.sampling.tempreature: unknown key; did you mean temperature?"),
        ({"verify": "sympy"}, "filter.verify: expected one of math, int, none; found 'sympy'"),
        ({"sampling": {"n": "eight"}}, "filter.sampling.n: expected an integer, found 'eight'"),
        ({"limit": 1.5}, "filter.limit: expected an integer, found 1.5"),
        ({"zzz": 1}, "filter.zzz: unknown key; expected one of verify, decontam, sampling, limit"),
    ],
)
def test_bad_keys_and_values_name_their_path(data, message):
    with pytest.raises(UserError) as e:
        from_dict(Stage, data, "filter")
    assert str(e.value) == message


def test_set_overrides_parse_values_as_yaml_and_reach_nested_keys():
    cfg = override(Stage(), ["sampling.temperature=1.0", "limit=null", "decontam=[a.parquet, b.parquet]"])
    assert cfg.sampling.temperature == 1.0 and cfg.limit is None
    assert cfg.decontam == ("a.parquet", "b.parquet")
    with pytest.raises(UserError, match="sampling.nn: unknown key; did you mean n"):
        override(Stage(), ["sampling.nn=3"])
    with pytest.raises(UserError, match="expected KEY=VALUE"):
        override(Stage(), ["temperature"])


def test_load_yaml_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "r.yaml"
    bad.write_text("filter:\n  verify: [int\n")
    with pytest.raises(UserError, match=r"r.yaml: line \d+ invalid YAML"):
        load_yaml(bad)
    with pytest.raises(UserError, match="no such file"):
        load_yaml(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(UserError, match="expected a mapping"):
        load_yaml(tmp_path / "list.yaml")
