"""Every value a run would use is inside its setting's declared domain (evo/learners/<algo>.py), checked at
start-up with the bound values of every search range, each refused once with its source, its range and the
fix; sizes that cannot be allocated are refused with the estimate. Found by fault injection: each of these
trained, crashed or restarted silently before.
Pure: no MPI, no torch."""

import math

import pytest

from evo.config import ConfigError, parse_config
from evo.config.memory import HostLoad, RankHost, crowded_hosts, host_loads

GiB = 2**30
PLENTY = 1024 * GiB


def parse(argv, tmp_path, memory=PLENTY, **kwargs):
    """``argv`` parsed with ``memory`` bytes available on the one host of every rank (unless ``ranks`` says)."""
    kwargs.setdefault("ranks", [RankHost("node1", memory)] * kwargs.get("world_size", 1))
    return parse_config([*argv, "--run-dir", str(tmp_path / "run")], **kwargs)


def problems(argv, tmp_path, **kwargs):
    with pytest.raises(ConfigError) as caught:
        parse(argv, tmp_path, **kwargs)
    found = caught.value.problems
    assert len(found) == len(set(found)), found  # each problem said once
    assert not (tmp_path / "run").exists()  # refused before anything is written
    return found


def only(argv, tmp_path, **kwargs) -> str:
    found = problems(argv, tmp_path, **kwargs)
    assert len(found) == 1, found  # one problem per bad value
    return found[0]


# --- fixed values ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, words",
    [
        # trained with every gradient flipped, and no word
        (["--hyperparams", "max_grad_norm:-0.5"], "max_grad_norm (--hyperparams) is -0.5; it must be > 0"),
        # trained
        (["--hyperparams", "gamma:1.5"], "gamma (--hyperparams) is 1.5; it must be in (0, 1]"),
        # passed the check, then crashed every rank and left the run directory behind
        (["--hyperparams", "learning_rate:-0.001"], "learning_rate (--hyperparams) is -0.001; it must be > 0"),
        (
            ["--algo", "sac", "--env-id", "Pendulum-v1", "--hyperparams", "learning_rate:-0.001"],
            "learning_rate (--hyperparams) is -0.001; it must be > 0",
        ),
        # "restarted" with fresh draws, hiding the bad input
        (["--hyperparams", "ent_coef:.nan"], "ent_coef (--hyperparams) is nan (not a number); it must be >= 0"),
        (["--hyperparams", "vf_coef:.inf"], "vf_coef (--hyperparams) is inf (not finite); it must be >= 0"),
        (["--hyperparams", "gae_lambda:1.01"], "gae_lambda (--hyperparams) is 1.01; it must be in [0, 1]"),
        (["--hyperparams", "clip_range:0"], "clip_range (--hyperparams) is 0.0; it must be > 0"),
        (["--hyperparams", "target_kl:-0.01"], "target_kl (--hyperparams) is -0.01; it must be > 0"),
        (["--hyperparams", "n_epochs:0"], "n_epochs (--hyperparams) is 0; it must be >= 1"),
        (
            ["--algo", "td3", "--env-id", "Pendulum-v1", "--hyperparams", "tau:0"],
            "tau (--hyperparams) is 0.0; it must be in (0, 1]",
        ),
        (
            ["--algo", "td3", "--env-id", "Pendulum-v1", "--hyperparams", "gradient_steps:-2"],
            "gradient_steps (--hyperparams) is -2; it must be >= 1 or -1",
        ),
        (
            ["--algo", "sac", "--env-id", "Pendulum-v1", "--hyperparams", "ent_coef:auto_-1"],
            "ent_coef (--hyperparams) is 'auto_-1'; it must be > 0, 'auto' or 'auto_<x>' with x > 0",
        ),
    ],
)
def test_a_fixed_value_outside_its_domain_is_refused_once_with_its_range_and_the_fix(argv, words, tmp_path):
    problem = only(argv, tmp_path)
    assert words in problem
    assert "change it" in problem  # the fix


def test_the_message_names_the_file_and_block_a_value_came_from(tmp_path):
    conf = tmp_path / "mine.yml"
    conf.write_text("default:\n  gamma: 0.99\nCartPole-v1:\n  gamma: 1.5\n")
    problem = only(["--conf-file", str(conf)], tmp_path)
    assert problem.startswith(f"gamma ({conf}[CartPole-v1]) is 1.5; it must be in (0, 1]")
    assert "e.g. to its default 0.99" in problem


def test_a_later_layer_that_corrects_a_value_wins(tmp_path):
    conf = tmp_path / "mine.yml"
    conf.write_text("CartPole-v1:\n  gamma: 1.5\n")
    assert parse(["--conf-file", str(conf), "--hyperparams", "gamma:0.9"], tmp_path).agent.settings["gamma"] == 0.9


def test_every_bad_value_is_reported_at_once(tmp_path):
    found = problems(["--hyperparams", "max_grad_norm:-0.5", "gamma:1.5", "n_epochs:0", "ent_coef:.nan"], tmp_path)
    assert [problem.split(" ")[0] for problem in found] == ["ent_coef", "gamma", "n_epochs", "max_grad_norm"]


def test_a_named_value_outside_its_set_gets_a_suggestion(tmp_path):
    problem = only(["--env-id", "bigfish", "--hyperparams", "aug_coef:0.1", "aug_type:flp"], tmp_path)
    assert (
        "aug_type (--hyperparams) is 'flp'; it must be one of 'crop'" in problem and "did you mean 'flip'?" in problem
    )


# --- search ranges --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, words",
    [
        (
            ["--hyperparams", "search_space:{gamma: {low: 0.9, high: 1.5}}"],
            "search_space.gamma (--hyperparams) is [0.9, 1.5]; every value must be in (0, 1]",
        ),
        (
            ["--gamma-range", "0.9", "1.5"],  # its horizon scale has a rule of its own
            "search_space.gamma (--gamma-range) uses scale 'horizon' and needs 0 <= low < high < 1",
        ),
        (
            ["--hyperparams", "search_space:{learning_rate: {low: -0.001, high: 0.001}}"],
            "search_space.learning_rate (--hyperparams) is [-0.001, 0.001]; every value must be > 0",
        ),
        (
            ["--hyperparams", "search_space:{n_epochs: {choices: [0, 5, 10]}}"],
            "search_space.n_epochs (--hyperparams) has the choices [0, 5, 10]; every value must be >= 1 (epochs over "
            "each rollout): drop 0",
        ),
        (
            ["--hyperparams", "search_space:{ent_coef: {low: -0.01, high: 0.01, scale: additive}}"],
            "search_space.ent_coef (--hyperparams) is [-0.01, 0.01]; every value must be >= 0",
        ),
        (
            ["--algo", "sac", "--env-id", "Pendulum-v1", "--hyperparams", "search_space:{tau: {low: 0.5, high: 2}}"],
            "search_space.tau (--hyperparams) is [0.5, 2.0]; every value must be in (0, 1]",
        ),
    ],
)
def test_a_search_range_reaching_outside_the_domain_is_refused_once(argv, words, tmp_path):
    problem = only(argv, tmp_path)
    assert words in problem


def test_a_range_across_two_parts_of_a_domain_is_refused(tmp_path):
    """gradient_steps is >= 1 or -1: the range [-1, 4] holds 0, which is neither."""
    space = "search_space:{gradient_steps: {low: -1, high: 4, type: int}}"
    argv = ["--algo", "sac", "--env-id", "Pendulum-v1", "--hyperparams", space, "gradient_steps:1"]
    assert "every value must be >= 1 or -1" in only(argv, tmp_path)


# --- a replayed schedule --------------------------------------------------------------------------------------


def test_a_replayed_schedules_values_are_checked(tmp_path):
    schedule = tmp_path / "schedule.yml"
    six = "ent_coef: 0.0, clip_range: 0.2, gae_lambda: 0.95, vf_coef: 0.5"
    schedule.write_text(
        "env_id: CartPole-v1\nalgo: ppo\nschedule:\n"
        f"- {{env_steps: 0, hparams: {{learning_rate: 0.001, gamma: 0.99, {six}}}}}\n"
        f"- {{env_steps: 1000, hparams: {{learning_rate: -0.001, gamma: 1.5, {six}}}}}\n"
    )
    found = problems(["--schedule", str(schedule), "--num-agents", "1"], tmp_path)
    assert found == [
        f"learning_rate (--schedule {schedule}, from env step 1000) is -0.001; it must be > 0 (Adam's step size): "
        "change it, e.g. to its default 0.0003",
        f"gamma (--schedule {schedule}, from env step 1000) is 1.5; it must be in (0, 1] (discount factor): "
        "change it, e.g. to its default 0.99",
    ]


# --- sizes that cannot be allocated ---------------------------------------------------------------------------


def test_networks_too_large_for_the_memory_are_refused_with_the_estimate(tmp_path):
    """A net_arch of [1000000, 1000000] failed 16 s in with an allocator traceback."""
    argv = ["--hyperparams", "policy_kwargs:{net_arch: [1000000, 1000000]}", "--num-agents", "4"]
    problem = only(argv, tmp_path, memory=16 * GiB, world_size=2)
    assert problem.startswith("memory: each member needs at least 32.0 TB")
    assert "networks pi [1000000, 1000000], vf [1000000, 1000000]: 32.0 TB" in problem
    assert "host node1: 2 ranks x 2 members = 4 members need at least 128.0 TB, it has 17.2 GB available" in problem
    assert "smaller networks" in problem and "fewer members per host" in problem


def test_the_members_of_every_rank_on_a_host_are_summed():
    """Issue 54 N9: 36 members of 1.2 GB on 2 ranks were accepted on a 21 GB machine (each rank's 18 fit,
    the host's 36 do not). Pure: what the ranks on each host hold together, against that host's memory."""
    member, available = int(1.15e9), 21 * 10**9  # 18 members: 20.7 GB, 36: 41.4 GB
    one_host = [RankHost("node1", available), RankHost("node1", available + 10**6)]
    assert host_loads(18, one_host) == [HostLoad("node1", 2, 36, available)]  # the least its ranks read
    assert crowded_hosts(member, 18, one_host) == [HostLoad("node1", 2, 36, available)]
    assert crowded_hosts(member, 18, one_host[:1]) == []  # one rank alone fits
    two_hosts = [RankHost("node1", available), RankHost("node2", available)]
    assert crowded_hosts(member, 18, two_hosts) == []
    mixed = [*two_hosts, RankHost("node2", available), RankHost("node3", None)]  # node3's memory unknown
    assert host_loads(18, mixed)[1:] == [HostLoad("node2", 2, 36, available), HostLoad("node3", 1, 18, None)]
    assert crowded_hosts(member, 18, mixed) == [HostLoad("node2", 2, 36, available)]
    assert crowded_hosts(member * 100, 18, [RankHost("node1", None)] * 2) == []


def test_a_run_whose_ranks_fit_alone_but_not_together_on_their_host_is_refused(tmp_path):
    """The refusal names the host, the sum, the memory it has and the fix; the same ranks on two hosts run."""
    argv = ["--hyperparams", "policy_kwargs:{net_arch: [6000, 6000]}", "--num-agents", "36"]  # 1.15 GB a member
    ranks = [RankHost("node1", 21 * 10**9)] * 2
    problem = only(argv, tmp_path, world_size=2, ranks=ranks)
    assert problem.startswith("memory: each member needs at least 1.2 GB"), problem
    assert "host node1: 2 ranks x 18 members = 36 members need at least 41.5 GB, it has 21.0 GB available" in problem
    assert "fewer members per host (a smaller --num-agents, or the same ranks spread over more hosts)" in problem
    parse(argv, tmp_path, world_size=2, ranks=[RankHost("node1", 21 * 10**9), RankHost("node2", 21 * 10**9)])


def test_the_largest_architecture_the_search_space_can_draw_is_estimated(tmp_path):
    space = "search_space:{pi_width: {low: 64, high: 200000, type: int}}"
    problem = only(["--hyperparams", space], tmp_path, memory=16 * GiB)
    assert "networks pi [200000, 200000], vf [64, 64]" in problem
    parse(["--hyperparams", space.replace("200000", "256")], tmp_path / "small", memory=16 * GiB)


def test_a_sac_replay_buffer_too_large_is_refused_with_the_estimate(tmp_path):
    argv = ["--algo", "sac", "--env-id", "Pendulum-v1", "--hyperparams", "buffer_size:1000000000"]
    problem = only(argv, tmp_path, memory=16 * GiB)
    # Pendulum: 3 float32 observations (twice: next observations too), 1 float32 action, reward, done, timeout
    assert "replay buffer 1000000000 x 40 bytes: 40.0 GB" in problem
    assert "a smaller buffer_size" in problem
    parse(argv[:-1] + ["buffer_size:100000000"], tmp_path / "fits", memory=16 * GiB)


def test_the_memory_check_is_skipped_where_the_available_memory_is_unknown(tmp_path):
    parse(["--hyperparams", "policy_kwargs:{net_arch: [1000000, 1000000]}"], tmp_path, memory=None)


def test_the_hosts_available_memory_is_read_from_proc_meminfo(tmp_path):
    from evo.config.memory import available_memory

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n")
    assert available_memory(meminfo) == 8_000_000 * 1024
    meminfo.write_text("MemTotal:       16000000 kB\n")
    assert available_memory(meminfo) is None
    assert available_memory(tmp_path / "missing") is None


def test_valid_runs_resolve_as_before(tmp_path):
    config = parse([], tmp_path)
    assert config.agent.settings["gamma"] == 0.98 and math.isclose(config.agent.settings["max_grad_norm"], 0.5)
