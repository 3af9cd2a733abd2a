"""distill eval at scale: data-parallel replicas, a merged adapter in its base's dtype, the
max_tokens clamp and the resolved protocol (Hub revisions, dtype, length, hardware, batch invariance)."""

import json
import shutil

import pyarrow.parquet as pq
import pytest

from reasonkit.distill.eval.run import EvalConfig, run_eval, summary_equal
from reasonkit.recipes.tasks.math import write_prompts

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def test_set(tmp_path_factory):
    path = tmp_path_factory.mktemp("evalset") / "test.parquet"
    write_prompts(path, 8, seed=3, variant="aime", split="test")
    return str(path)


def config(model, data, out, **kw):
    base = dict(
        model=model,
        data=data,
        out=str(out),
        backend="hf",
        k=2,
        max_tokens=64,
        dtype="float32",
        verifier="int",
        batch_size=2,
        limit=4,
    )
    return EvalConfig(**{**base, **kw})


def samples(out):
    return pq.read_table(out / "samples").sort_by([("id", "ascending"), ("sample", "ascending")]).to_pylist()


def test_two_replicas_write_one_replicas_samples_and_say_so(teacher_dir, test_set, tmp_path):
    one = run_eval(config(teacher_dir, test_set, tmp_path / "one"))
    two = run_eval(config(teacher_dir, test_set, tmp_path / "two", data_parallel=2))
    assert two["protocol"]["data_parallel"] == 2 and one["protocol"]["data_parallel"] == 1
    manifest = json.loads((tmp_path / "two" / "generations" / "_manifest.json").read_text())
    assert manifest["backend_info"]["data_parallel"] == 2 and manifest["last_run"]["replicas"] == 2
    # the hf backend seeds per batch: replicas are dealt whole batches, so the samples are the same
    assert samples(tmp_path / "two") == samples(tmp_path / "one")
    assert summary_equal(two, one) and two != one  # the same numbers, made on two replicas
    # the replica count only says how fast: a directory made by one replica resumes on two
    again = run_eval(config(teacher_dir, test_set, tmp_path / "one", data_parallel=2))
    assert summary_equal(again, one)


def test_a_merged_adapter_keeps_its_bf16_base_dtype(tiny_model_dir, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reasonkit.distill.eval.model import merge_adapter

    base_dir = tmp_path / "base"
    AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16).save_pretrained(base_dir)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(base_dir)
    torch.manual_seed(0)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32), lora)
    peft_model.save_pretrained(tmp_path / "adapter")

    merged = merge_adapter(str(base_dir), str(tmp_path / "adapter"), tmp_path / "merged")
    assert json.loads((tmp_path / "merged" / "config.json").read_text())["dtype"] == "bfloat16"
    with safe_open(str(tmp_path / "merged" / "model.safetensors"), "pt") as f:
        dtypes = {f.get_slice(name).get_dtype() for name in f.keys()}
        q = f.get_tensor("model.layers.0.self_attn.q_proj.weight")
    assert dtypes == {"BF16"}, dtypes
    # merged in float32, rounded once: the fp32 merge's weights to bf16
    want = peft_model.merge_and_unload().model.layers[0].self_attn.q_proj.weight.detach().to(torch.bfloat16)
    assert torch.equal(q, want)
    assert AutoModelForCausalLM.from_pretrained(merged).dtype == torch.bfloat16


def test_a_clamped_max_tokens_is_recorded(teacher_dir, test_set, tmp_path, capfd):
    # every prompt is 42 tokens: 42 + 80 > 100, so each request may generate 58 tokens, not 80
    s = run_eval(
        config(
            teacher_dir,
            test_set,
            tmp_path / "e",
            k=1,
            limit=4,
            batch_size=1,
            max_tokens=80,
            max_model_len=100,
            temperature=1.0,
        )
    )
    clamp = s["protocol"]["max_tokens_clamp"]
    traces = pq.read_table(tmp_path / "e" / "generations").to_pylist()
    budgets = {r["id"]: 100 - r["prompt_tokens"] for r in traces}
    assert clamp == {
        "clamped_problems": 4,
        "problems": 4,
        "max_model_len": 100,
        "min_budget": min(budgets.values()),
        "max_budget": max(budgets.values()),
    }
    assert all(r["completion_tokens"] <= budgets[r["id"]] for r in traces)
    cut = [r for r in traces if r["finish_reason"] == "length"]
    assert all(r["completion_tokens"] == budgets[r["id"]] for r in cut), "the recorded budget is the one applied"
    assert "max_tokens 80 tokens was cut to" in capfd.readouterr().err
    assert (
        "max_tokens 80 tokens was cut to 58-58 tokens for 4 of 4 problems"
        in (tmp_path / "e" / "summary.md").read_text()
    )
    unclamped = run_eval(config(teacher_dir, test_set, tmp_path / "f", k=1, limit=2, max_tokens=80))
    assert unclamped["protocol"]["max_tokens_clamp"]["clamped_problems"] == 0


@pytest.fixture
def offline_hub(tmp_path, monkeypatch, teacher_dir):
    """A Hugging Face cache as `huggingface-cli download` leaves it, under a fresh HF_HOME: the
    teacher as model org/teacher and a dataset org/aime, each at snapshot SHA named by refs/main."""
    import huggingface_hub.constants as constants

    from reasonkit.identity import clear_memo

    hub = tmp_path / "hf" / "hub"
    for kind, name in (("models", "org--teacher"), ("datasets", "org--aime")):
        repo = hub / f"{kind}--{name}"
        (repo / "refs").mkdir(parents=True)
        (repo / "refs" / "main").write_text(SHA)
        (repo / "snapshots" / SHA).mkdir(parents=True)
    for f in (
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
    ):
        shutil.copy(f"{teacher_dir}/{f}", hub / "models--org--teacher" / "snapshots" / SHA / f)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))  # read at import; this process imported it
    clear_memo()
    yield hub
    clear_memo()


def test_the_protocol_records_resolved_values(offline_hub, test_set, tmp_path, monkeypatch):
    from reasonkit.distill.eval.protocol import batch_invariance, hub_revision_of

    s = run_eval(config("org/teacher", test_set, tmp_path / "e", k=1, limit=2, dtype="auto"))
    p = s["protocol"]
    assert p["model_revision"] == SHA and p["model_hash"] == f"hub:org/teacher@{SHA}"
    assert p["dataset_revision"] is None  # a local file has no Hub revision; its fingerprint says what it was
    assert p["dtype"] == "float32" and p["dtype_requested"] == "auto"
    assert p["max_model_len"] == 1024  # the teacher's max_position_embeddings, resolved by the backend
    assert p["hardware"]["gpu"] == "cpu" and p["hardware"]["gpu_count"] == 0
    # what the floats depended on (issue 36 item 3): the CPU, the kernels torch chose, threads, libraries
    import torch

    assert p["hardware"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and p["hardware"]["cpu"]
    assert p["hardware"]["threads"] == torch.get_num_threads() and isinstance(p["hardware"]["float_env"], dict)
    assert p["versions"]["torch"] == torch.__version__ and p["versions"]["trl"] and p["versions"]["transformers"]
    assert p["batch_invariant"] is False and p["data_parallel"] == 1
    # a dataset named with its split is the Hub repo at the revision its cache's refs/main names
    assert hub_revision_of("org/aime", "dataset") == hub_revision_of("org/aime:default:train", "dataset") == SHA
    assert hub_revision_of(f"org/aime@{SHA}:train", "dataset") == SHA
    assert hub_revision_of("org/unknown", "dataset") is None
    # vLLM's batch-invariant kernels are its GPU worker's; on CPU the flag changes nothing
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "1")
    assert batch_invariance("vllm")["batch_invariant"] is False
    assert "CPU" in batch_invariance("vllm")["batch_invariant_how"]


def test_auto_replicas_fill_the_visible_gpus_one_engine_each(monkeypatch, tmp_path):
    from reasonkit.distill.eval import protocol as eval_protocol
    from reasonkit.errors import UserError

    monkeypatch.setattr(eval_protocol, "_visible_gpus", lambda: 8)  # an 8-GPU node, seen from this CPU one
    auto = lambda **kw: eval_protocol.resolve_data_parallel(
        EvalConfig(model="m", data="d", out=str(tmp_path), data_parallel="auto", **kw)
    )  # noqa: E731
    assert auto() == 8 and auto(tensor_parallel=2) == 4
    assert auto(tensor_parallel=2, engine_args={"pipeline_parallel_size": 2}) == 2
    assert auto(backend="hf") == 8 and auto(engine="ray", replicas=2) == 1
    with pytest.raises(UserError, match="openai backend's parallelism is the server's"):
        eval_protocol.resolve_data_parallel(
            EvalConfig(model="m", data="d", out="o", backend="openai", base_url="http://x/v1", data_parallel=2)
        )
