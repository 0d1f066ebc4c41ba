"""``--final-eval EPISODES --final-top K`` at start-up (pure): what it resolves to, and every refusal with its
fix. The final pick itself: tests/unit/core/test_final.py, tests/unit/runner/test_final_runs.py."""

import pytest

from evo.config import ConfigError, parse_config
from evo.core.streams import evaluation_seed

ARCH_SPACE = "search_space:{pi_layers: {low: 1, high: 3, type: int}}"


def parse(tmp_path, *argv, world_size=4):
    return parse_config([*argv, "--run-dir", str(tmp_path / "run")], world_size=world_size)


def refused(tmp_path, *argv, world_size=4) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(tmp_path, *argv, world_size=world_size)
    return caught.value.problems


def test_off_by_default_and_what_it_resolves_to(tmp_path):
    assert parse(tmp_path).final_settings is None
    settings = parse(tmp_path, "--final-eval", "20", "--seed", "3").final_settings
    assert (settings.episodes, settings.top, settings.seed) == (20, 3, evaluation_seed(3))
    assert (settings.levels, settings.deterministic, settings.score, settings.generation) == (None, True, "return", 12)
    assert parse(tmp_path, "--final-eval", "5", world_size=2).final_settings.top == 2  # the population, if smaller
    assert parse(tmp_path, "--final-eval", "5", "--final-top", "4").final_settings.top == 4
    procgen = parse(tmp_path, "--env-id", "bigfish", "--num-levels", "200", "--final-eval", "5").final_settings
    assert (procgen.levels, procgen.deterministic) == ((10_000, 1_000), False)  # evo-evaluate's --actions auto
    objective = parse(tmp_path, "--final-eval", "5", "--objective", "return:min").final_settings
    assert objective.score == "return:min"


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--final-eval", "-1"], "--final-eval -1: use 0 (no final pick) or a positive number of fresh episodes"),
        (["--final-eval", "5", "--final-top", "0"], "--final-top 0: give at least 1 member"),
        (
            ["--final-eval", "5", "--final-top", "5"],
            "--final-top 5: the population has 4 member(s); give --final-top 4 or fewer",
        ),
        (
            ["--final-top", "2"],
            "--final-top 2: the final pick plays its top members only with --final-eval EPISODES; give --final-eval "
            "(e.g. 20), or drop --final-top",
        ),
        (
            ["--final-eval", "5", "--objective", "return,info:x", "--explore", "pb2-mix"],
            "--final-eval 5 --objective return,info:x: several objectives rank members by Pareto fronts, and a front "
            "has no one best to pick (evo-export --front exports it); give one objective, or drop --final-eval",
        ),
        (
            ["--env-id", "Pendulum-v1", "--max-distillations", "1", "--hyperparams", ARCH_SPACE, "--final-eval", "5"],
            "--final-eval 5 --max-distillations 1: a run may end within a stage, whose students are not yet its "
            "population, and the final pick is not built for stages; drop one of the two flags",
        ),
    ],
    ids=["episodes", "top", "population", "alone", "objectives", "stages"],
)
def test_refused_naming_the_value_and_the_fix(tmp_path, argv, said):
    assert said in refused(tmp_path, *argv)
    assert not (tmp_path / "run").exists()  # nothing written
