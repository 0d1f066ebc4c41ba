"""``precision: bf16``: refused without native bfloat16 (the config layer; pure: the processor's
flags are given or mocked). The same learning in bfloat16: tests/unit/sb3/test_precision.py (one
update's gradient) and tests/e2e/test_precision_runs.py (whole runs).
"""

import pytest
import yaml

from evo.config import ConfigError, parse_config
from evo.config import precision as config_precision
from evo.config.precision import resolve_precision

# /proc/cpuinfo excerpts: this project's AMD EPYC (AVX2, no bfloat16) and an Intel Sapphire Rapids
EPYC = "processor\t: 0\nmodel name\t: AMD EPYC 7B12\nflags\t\t: fpu sse2 avx fma avx2 bmi2\n\n"
SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd bf16\n"  # an ARM kernel: no 'flags' line


# --- the refusal (pure: the flags text is given) -------------------------------------------------


def test_bf16_is_refused_without_native_bfloat16_and_the_message_says_what_to_use():
    problems = []
    assert resolve_precision("bf16", None, problems, cpuinfo=EPYC) == "fp32"
    (problem,) = problems
    assert "--precision bf16: this processor has no native bfloat16" in problem
    assert "avx512_bf16 nor amx_bf16" in problem and "it has avx2, fma" in problem
    assert "Use --precision fp32" in problem

    problems = []
    resolve_precision(None, "bf16", problems, cpuinfo=GRAVITON)  # from the YAML, no flags to read
    assert problems and problems[0].startswith("precision (YAML) bf16: this processor has no native bfloat16")


def test_bf16_is_accepted_with_avx512_bf16_or_amx_and_fp32_anywhere():
    problems = []
    assert resolve_precision("bf16", None, problems, cpuinfo=SAPPHIRE_RAPIDS) == "bf16"
    assert resolve_precision("bf16", None, problems, cpuinfo="flags : avx512f avx512_bf16\n") == "bf16"
    assert resolve_precision("fp32", "bf16", problems, cpuinfo=EPYC) == "fp32"  # the flag wins over the YAML
    assert resolve_precision(None, None, problems, cpuinfo=EPYC) == "fp32"  # the default
    assert problems == []
    resolve_precision(None, "fp16", problems, cpuinfo=SAPPHIRE_RAPIDS)
    assert problems == ["precision (YAML) 'fp16': use one of fp32, bf16"]


def test_parse_config_refuses_bf16_on_a_processor_without_it(tmp_path, monkeypatch):
    """Through the validation path every rank runs (a ConfigError: every rank exits 2), with the
    other problems of the command line reported at the same time."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(EPYC)
    monkeypatch.setattr(config_precision, "CPUINFO", cpuinfo)
    with pytest.raises(ConfigError) as caught:
        parse_config(["--precision", "bf16", "--seed", "-1"], check_run_dir=False)
    assert len(caught.value.problems) == 2
    assert any("no native bfloat16" in p for p in caught.value.problems)
    with pytest.raises(ConfigError, match="precision \\(YAML\\) bf16: this processor has no native bfloat16"):
        parse_config(["--hyperparams", "precision:bf16"], check_run_dir=False)
    assert parse_config([], check_run_dir=False).precision == "fp32"

    cpuinfo.write_text(SAPPHIRE_RAPIDS)
    assert parse_config(["--hyperparams", "precision:bf16"], check_run_dir=False).precision == "bf16"


def test_a_run_may_resume_in_the_other_precision(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(SAPPHIRE_RAPIDS)
    monkeypatch.setattr(config_precision, "CPUINFO", cpuinfo)
    run_dir = tmp_path / "run"
    started = parse_config(["--run-dir", str(run_dir)])
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(started.to_dict()))
    resumed = parse_config(["--resume", "--run-dir", str(run_dir), "--precision", "bf16"])
    assert (started.precision, resumed.precision) == ("fp32", "bf16")
