"""vllm_mode server: where TRL's GRPOTrainer finds the `trl vllm-serve` it samples from (issue 35 item 6).

Before these keys a server run could only reach TRL's default, 0.0.0.0:8000, from every node."""

import pytest

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.rl import grpo
from reasonkit.distill.student import resolve_device, trainer_args
from reasonkit.errors import UserError

BASE = dict(method="grpo", student="m", data="d", out="o", rewards={"accuracy": 1.0}, threads=1)


def arguments(tmp_path, monkeypatch, **settings):
    """The GRPOConfig `distill train` builds, as on a GPU node with a vLLM TRL drives (use_vllm resolved on)."""
    monkeypatch.setattr(grpo, "resolve_vllm", lambda cfg, cuda: True)
    cfg = TrainConfig(**BASE, vllm_mode="server", **settings)
    return grpo.grpo_arguments(cfg, trainer_args(cfg, resolve_device(cfg), tmp_path / "ck", 256), longest_prompt=100)


def test_the_server_host_port_and_timeout_reach_grpoconfig(tmp_path, monkeypatch):
    args = arguments(
        tmp_path, monkeypatch, vllm_server_host="10.0.0.7", vllm_server_port=8001, vllm_server_timeout=900
    )
    assert (args.vllm_mode, args.vllm_server_host, args.vllm_server_port, args.vllm_server_timeout) == (
        "server",
        "10.0.0.7",
        8001,
        900,
    )
    assert args.vllm_server_base_url is None


def test_a_base_url_reaches_grpoconfig_and_unset_keys_keep_trls_defaults(tmp_path, monkeypatch):
    args = arguments(tmp_path, monkeypatch, vllm_server_base_url="http://node1:8000")
    assert args.vllm_server_base_url == "http://node1:8000"
    assert (args.vllm_server_host, args.vllm_server_port, args.vllm_server_timeout) == ("0.0.0.0", 8000, 240.0)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(vllm_server_port=0), "vllm_server_port: must be a TCP port, 1 to 65535, found 0"),
        (dict(vllm_server_port=70000), "vllm_server_port: must be a TCP port, 1 to 65535, found 70000"),
        (dict(vllm_server_base_url="http://a:1", vllm_server_host="b"), "not both"),
        (dict(vllm_server_base_url="node1:8000"), "must be an http:// or https:// URL"),
        (dict(vllm_server_timeout=0), "vllm_server_timeout: must be > 0"),
        (dict(vllm_mode="colocate", vllm_server_host="b"), "vllm_server_host apply with vllm_mode: server"),
    ],
)
def test_server_settings_trl_would_ignore_or_fail_on_are_refused(settings, message):
    settings = {"vllm_mode": "server", **settings}
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TrainConfig(**BASE, **settings)


def test_where_the_server_is_is_not_fingerprinted():
    here = TrainConfig(**BASE, vllm_mode="server", vllm_server_host="a", vllm_server_port=1)
    there = TrainConfig(**BASE, vllm_mode="server", vllm_server_base_url="http://b:2", vllm_server_timeout=600)
    assert here.fingerprinted() == there.fingerprinted()
