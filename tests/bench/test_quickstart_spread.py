"""bench/quickstart_spread.py (issue 36 item 2): which steps a spread run seeds and reruns, under which
environment, and the table it prints from its runs (fake runs here: a real one is a quickstart per run)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "quickstart_spread.py"
RECIPE = ROOT / "recipes" / "quickstart.yaml"


def spread():
    spec = importlib.util.spec_from_file_location("quickstart_spread", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_run(setting, seed, sft, grpo=None, capability="AVX2"):
    figures = {"eval_student_sft": sft} | ({"eval_student_grpo": grpo} if grpo is not None else {})
    hardware = {"cpu": "AMD EPYC 7B13", "cpu_capability": capability, "threads": 2}
    return {"setting": setting, "seed": seed, "figures": figures, "hardware": hardware, "wall_s": 300.4}


def test_the_table_gives_each_models_mean_and_range_and_the_machine():
    module = spread()
    runs = [
        fake_run("avx2", 0, 0.875, 0.85),
        fake_run("avx2", 1, 0.825, 0.80),
        fake_run("avx512", 0, 0.85, capability="AVX512"),
    ]
    figures = module.aggregate(runs)
    assert figures["eval_student_sft"] == {"n": 3, "mean": 0.85, "min": 0.825, "max": 0.875}
    assert figures["eval_student_grpo"]["n"] == 2 and figures["eval_student_grpo"]["mean"] == 0.825
    text = module.table(runs)
    assert "| eval_student_sft | 0.850 | 0.825-0.875 (0.050) | 3 |" in text
    assert "| avx512 | 0 | 0.850 | - | 300 s |" in text  # a run without the GRPO rung shows a dash
    assert "machine: AMD EPYC 7B13; torch kernels: AVX2, AVX512; threads: 2" in text


def test_only_the_steps_that_run_are_seeded_and_redone():
    module = spread()
    steps = module.recipe_steps(RECIPE)
    running = module.steps_that_run(steps, None, ["sft", "eval_student_sft"])
    sets = module.seed_overrides(running, 2)
    assert sets == ["sft.seed=2", "eval_student_sft.seed=2"]
    lines = module.commands(RECIPE, Path("out"), running, sets, None, ["sft", "eval_student_sft"])
    assert [line[line.index("--only") + 1] for line in lines] == ["sft", "eval_student_sft"]
    assert all("--overwrite" in line and line.count("--set") == 2 for line in lines)
    from_sft = module.steps_that_run(steps, "sft", None)
    assert from_sft[0]["name"] == "sft" and "train_problems" not in module.seed_overrides(from_sft, 1)
    assert "student_samples.seed=1" in module.seed_overrides(from_sft, 1)  # it samples: seeded too
    everything = module.seed_overrides(steps, 1)
    assert "student.seed=1" in everything and "traces.seed=1" in everything  # a fresh student's weights too
    assert not any(item.split(".")[0].endswith("_problems") for item in everything)  # the task stays fixed


def test_each_setting_sets_its_own_variables_and_drops_the_callers():
    module = spread()
    caller = {"PATH": "/bin", "ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
    assert module.run_env("native", caller) == {"PATH": "/bin"}
    avx2 = module.run_env("avx2", caller)
    assert avx2["ATEN_CPU_CAPABILITY"] == "avx2" and avx2["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert avx2["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    assert avx2["REASONKIT_BENCH_VLLM_AVX2"] == "1" and avx2["PYTHONPATH"].startswith(str(ROOT / "bench"))
    assert "PYTHONPATH" not in module.run_env("avx512", caller)


def test_the_avx2_setting_makes_vllm_load_its_avx2_kernels():
    """vLLM picks its kernel build by asking torch whether the CPU has AVX-512: under the avx2 setting the
    answer is no in every process (on any CPU), under native it is the CPU's own."""
    module = spread()
    probe = [sys.executable, "-c", "import torch.cpu; print(torch.cpu._is_avx512_supported())"]
    env = module.run_env("avx2", {"PATH": "/usr/bin:/bin"})
    assert subprocess.run(probe, env=env, capture_output=True, text=True, check=True).stdout.strip() == "False"
    native = subprocess.run(
        probe, env=module.run_env("native", {"PATH": "/usr/bin:/bin"}), capture_output=True, text=True, check=True
    ).stdout.strip()
    import torch.cpu

    assert native == str(torch.cpu._is_avx512_supported())


def test_a_run_is_read_from_its_eval_summaries_and_train_report(tmp_path):
    module = spread()
    (tmp_path / "eval_student_sft").mkdir()
    summary = {"pass@1": 0.8417, "protocol": {"hardware": {"cpu": "x", "cpu_capability": "AVX512"}}}
    (tmp_path / "eval_student_sft" / "summary.json").write_text(json.dumps(summary))
    for step, capability in (("dpo", "AVX512"), ("sft", "AVX2")):  # dpo: the base run's, copied, not rerun
        (tmp_path / step).mkdir(exist_ok=True)
        (tmp_path / step / "report.json").write_text(json.dumps({"hardware": {"cpu_capability": capability}}))
    found = module.read_run(tmp_path, ["eval_student_sft", "eval_student_grpo"], ["sft"])
    assert found["figures"] == {"eval_student_sft": 0.8417}
    assert found["hardware"]["cpu_capability"] == "AVX2"  # what this run's training used, ahead of the eval's
    assert module.read_run(tmp_path, ["eval_student_sft"], [])["hardware"]["cpu_capability"] == "AVX512"


def test_the_command_line_prints_a_written_table_and_refuses_what_it_cannot_do(tmp_path):
    written = tmp_path / "runs.json"
    written.write_text(json.dumps({"runs": [fake_run("avx2", 0, 0.9)]}))
    (tmp_path / "more.json").write_text(json.dumps({"runs": [fake_run("avx2", 1, 0.8)]}))
    shown = subprocess.run(
        [sys.executable, str(SCRIPT), "--aggregate", str(written), str(tmp_path / "more.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "| eval_student_sft | 0.850 | 0.800-0.900 (0.100) | 2 |" in shown.stdout
    helped = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--seeds" in helped.stdout and "--isa" in helped.stdout
    refused = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", "sft"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2 and "--base" in refused.stderr
