"""The generic SB3 learner (evo/sb3/learner.py) with PPO: hyperparameters reach PPO's internals,
and a member's learner state moves bit-exactly through an exploit (real SB3, real envs, no MPI);
Procgen's envs and the IMPALA policy. The flat buffer itself: test_flat.py."""

import numpy as np
import pytest
import torch

from evo.config import parse_config
from evo.core.explorers import explore
from evo.core.result import Standing
from evo.sb3.flat import state_tensors
from evo.sb3.policies import ImpalaCNN
from tests.support import TINY_PROCGEN, capture_logger, member_of, write_hyperparams


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    hp = write_hyperparams(tmp_path_factory.mktemp("hp"))
    return parse_config(["--hyperparams", str(hp)], check_run_dir=False)


def capture(member):
    logger, writer = capture_logger()
    member.model.set_logger(logger)
    return writer


def test_new_hyperparameters_reach_optimizer_buffer_and_train(config):
    donor = member_of(config, 0)
    recipient = member_of(config, 1)
    donor.train(256)
    recipient.train(256)
    rng = np.random.default_rng(0)
    new, _ = explore(donor.hparams, config.agent.search_space, rng, (0.8, 1.2), resample_probability=1.0)
    assert all(new[k] != donor.hparams[k] for k in new)

    recipient.load({"weights": donor.pack().copy()}, new)  # exploit + explore
    writer = capture(recipient)
    recipient.train(256)
    recipient.model.logger.dump(recipient.env_steps)
    trained = [row for row in writer.rows if "train/clip_range" in row][-1]

    assert recipient.model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(new["learning_rate"])
    assert trained["train/learning_rate"] == pytest.approx(new["learning_rate"])
    assert trained["train/clip_range"] == pytest.approx(new["clip_range"])
    assert recipient.model.rollout_buffer.gamma == pytest.approx(new["gamma"])
    assert recipient.model.rollout_buffer.gae_lambda == pytest.approx(new["gae_lambda"])
    assert recipient.model.ent_coef == pytest.approx(new["ent_coef"])
    assert recipient.model.vf_coef == pytest.approx(new["vf_coef"])
    assert recipient.effective_hparams() == pytest.approx(new)
    # and the donor kept its own
    assert donor.effective_hparams() == pytest.approx(donor.hparams)


def test_setting_attributes_naively_would_not_work(config):
    """Why the learner exists: SB3 resets the optimizer's lr from lr_schedule in train()."""
    member = member_of(config, 0)
    original = member.hparams["learning_rate"]
    member.model.learning_rate = 0.123  # what a naive PBT script does
    member.train(128)
    assert member.model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(original)
    member.set_hparams(dict(member.hparams, learning_rate=0.123))
    member.train(128)
    assert member.model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(0.123)


def test_exploit_copies_weights_and_adam_state_bit_exactly(config):
    donor = member_of(config, 0)
    recipient = member_of(config, 1)
    donor.train(256)
    recipient.train(256)
    pairs = zip(state_tensors(donor.model), state_tensors(recipient.model), strict=True)
    assert not all(torch.equal(a, b) for a, b in pairs)
    recipient.load({"weights": donor.pack().copy()}, recipient.hparams)
    donor_state, recipient_state = state_tensors(donor.model), state_tensors(recipient.model)
    assert all(torch.equal(a, b) for a, b in zip(donor_state, recipient_state, strict=True))
    # Adam moments and step counts moved too
    donor_adam = donor.model.policy.optimizer.state_dict()["state"]
    recipient_adam = recipient.model.policy.optimizer.state_dict()["state"]
    for key in donor_adam:
        for name in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(donor_adam[key][name], recipient_adam[key][name])
    assert float(donor_adam[0]["step"]) > 0
    # the recipient's own episodes no longer count towards its score
    assert np.isnan(recipient.training_score())


def test_members_with_equal_hyperparameters_start_from_weights_and_envs_of_their_own(config):
    """Each member's model and envs are seeded by member_seed(seed, member): two members with the same
    hyperparameters start from different weights and different first observations (seeding every member with
    --seed alone would make them twins, and PBT would compare copies), and a member made again starts the same."""
    first, second, again = member_of(config, 0), member_of(config, 1), member_of(config, 0)
    assert first.hparams == second.hparams
    assert not np.array_equal(first.buffer, second.buffer)
    assert np.array_equal(first.buffer, again.buffer)
    observations = [member.model.env.reset() for member in (first, second, again)]
    assert not np.array_equal(observations[0], observations[1]) and np.array_equal(observations[0], observations[2])


def test_the_exploit_state_is_the_flat_buffer_by_name(config):
    """PPO without normalisation: the exploit state is the weights alone, the member's own memory."""
    member = member_of(config, 0)
    state = member.exploit_state()
    assert list(state) == ["weights"] and state["weights"] is member.buffer


def test_training_score_and_eval_score(tmp_path):
    config = parse_config(["--eval-episodes", "3", "--num-envs", "2"], check_run_dir=False)
    member = member_of(config, 0)
    assert np.isnan(member.training_score())
    member.train(1024)
    returns = [info["r"] for info in member.model.ep_info_buffer][-10:]
    assert member.training_score() == pytest.approx(np.mean(returns))
    assert member.eval_env is not None and member.test_score() >= 8  # CartPole returns >= 8
    scores = member.evaluate()
    assert scores.score == scores.score_train == member.training_score()  # --select-on train (default)
    member.select_on = "test"
    assert member.score() >= 8


def test_every_module_is_in_the_mode_sb3_asks_for_and_a_repeated_mode_walks_nothing(monkeypatch):
    """The policy skips SB3's walk over its modules when it is in the mode already: a
    rollout and an evaluation still run every module in eval mode, an update in train mode."""
    config = parse_config(["--eval-episodes", "3", "--num-envs", "2", "--seed", "3"], check_run_dir=False)
    member = member_of(config, 0)
    policy = member.model.policy
    seen = []
    predict, evaluate_actions = policy._predict, policy.evaluate_actions

    def modes():
        return {module.training for module in policy.modules()}

    def recording_predict(*args, **kwargs):
        seen.append(("predict", modes()))
        return predict(*args, **kwargs)

    def recording_evaluate_actions(*args, **kwargs):
        seen.append(("update", modes()))
        return evaluate_actions(*args, **kwargs)

    monkeypatch.setattr(policy, "_predict", recording_predict)
    monkeypatch.setattr(policy, "evaluate_actions", recording_evaluate_actions)
    forward = policy.forward
    monkeypatch.setattr(policy, "forward", lambda *a, **k: (seen.append(("rollout", modes())), forward(*a, **k))[1])
    member.train(256)
    member.test_score()
    member.train(256)
    assert {"rollout", "update", "predict"} == {kind for kind, _ in seen}
    assert all(mode == ({True} if kind == "update" else {False}) for kind, mode in seen)

    walks = []
    walk = policy.train
    monkeypatch.setattr(policy, "train", lambda mode=True: (walks.append(mode), walk(mode))[1])
    policy.set_training_mode(False)
    policy.set_training_mode(False)
    policy.set_training_mode(True)
    policy.set_training_mode(True)
    assert walks == [False, True]


def test_procgen_evaluation_runs_on_held_out_levels():
    config = parse_config(
        ["--env-id", "bigfish", "--num-levels", "5", "--start-level", "3", "--eval-episodes", "1", "--num-envs", "2"],
        check_run_dir=False,
    )
    member = member_of(config, 0)
    train_env, eval_env = member.model.get_env().unwrapped, member.eval_env.unwrapped
    try:
        assert (train_env.start_level, train_env.num_levels) == (3, 5)
        assert (eval_env.start_level, eval_env.num_levels) == (8, 0)  # the full distribution, after [3, 8)
    finally:
        member.close()


def test_impala_cnn_matches_the_paper():
    import gymnasium as gym

    space = gym.spaces.Box(0, 255, (3, 64, 64), np.uint8)
    extractor = ImpalaCNN(space, features_dim=256)
    convs = [m for m in extractor.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs] == [16] * 5 + [32] * 5 + [32] * 5
    assert extractor(torch.zeros(2, 3, 64, 64)).shape == (2, 256)
    assert extractor.linear[0].in_features == 32 * 8 * 8


def test_bigfish_member_trains_with_impala(tmp_path):
    hp = write_hyperparams(tmp_path, TINY_PROCGEN)
    config = parse_config(["--env-id", "bigfish", "--hyperparams", str(hp)], check_run_dir=False)
    member = member_of(config, 0)
    assert isinstance(member.model.policy.features_extractor, ImpalaCNN)
    params = sum(p.numel() for p in member.model.policy.parameters())
    assert 600_000 < params < 650_000  # the Procgen paper's IMPALA policy: ~626k parameters
    member.train(64)
    assert member.env_steps == 64


def test_procgen_vecenv_is_seeded_and_steps():
    """Also leaves its envs to the garbage collector on purpose: gym3's __del__ used to
    deadlock on cffi's lock when run from a GC pass (this suite hung for 10 minutes)."""
    from evo.sb3.envs import ProcgenVecEnv

    def rollout(seed):
        env = ProcgenVecEnv("coinrun", 2, seed=seed)
        frames = [env.reset()]
        for _ in range(5):
            env.step_async(np.array([1, 7]))
            observation, reward, done, infos = env.step_wait()
            frames.append(observation)
            assert observation.shape == (2, 64, 64, 3) and observation.dtype == np.uint8
            assert reward.shape == (2,) and done.dtype == bool and len(infos) == 2
        return np.stack(frames)

    assert np.array_equal(rollout(7), rollout(7))
    assert not np.array_equal(rollout(7), rollout(8))


def test_cpu_tuning_changes_no_result(tmp_path):
    """Same seed, same first update with and without channels-last and the allocator settings."""
    hp = write_hyperparams(tmp_path, "procgen:\n  n_envs: 2\n  n_steps: 16\n  n_minibatches: 2\n  n_epochs: 1\n")
    states = {}
    for tuning in (True, False):
        argv = ["--env-id", "bigfish", "--hyperparams", str(hp)] + ([] if tuning else ["--no-cpu-tuning"])
        config = parse_config(argv, check_run_dir=False)
        member = member_of(config, 0)
        assert member.model.policy.features_extractor.channels_last is tuning
        member.train(32)
        states[tuning] = member.pack().copy()
    # one Adam step moves a weight by up to ~lr = 5e-4; rounding differences stay far below
    assert np.abs(states[True] - states[False]).max() < 1e-4
    assert not np.array_equal(states[True][:1000], np.zeros(1000))


def test_channels_last_forward_is_the_same_function():
    import gymnasium as gym

    space = gym.spaces.Box(0, 255, (3, 64, 64), np.uint8)
    torch.manual_seed(0)
    plain = ImpalaCNN(space)
    fast = ImpalaCNN(space, channels_last=True)
    fast.load_state_dict(plain.state_dict())
    observations = torch.rand(8, 3, 64, 64)
    assert torch.allclose(plain(observations), fast(observations), atol=1e-5)


def test_a_recipient_with_no_finished_episode_keeps_its_donors_score_marked_stale(config, tmp_path):
    """The rule of "Which score?": no NaN for lack of a finished episode after an exploit."""
    from evo.rundir import checkpoint as ckpt
    from evo.rundir.checkpoint import member_payload
    from evo.sb3.rng import rng_state

    donor = member_of(config, 0)
    recipient = member_of(config, 1)
    donor.train(512)
    recipient.train(512)
    assert not recipient.score_train_stale and np.isfinite(recipient.training_score())
    donor_score = donor.training_score()
    donor_outcomes = donor.evaluate().outcomes  # the returns behind its score, one per scored episode
    assert donor_outcomes == tuple(info["r"] for info in donor.model.ep_info_buffer)[-10:]
    assert np.mean(donor_outcomes) == pytest.approx(donor_score)

    recipient.load({"weights": donor.pack().copy()}, recipient.hparams)
    assert np.isnan(recipient.training_score()) and recipient.evaluate().outcomes == ()  # nothing carried yet
    recipient.carry(Standing(donor_score, (), donor_outcomes))  # what the run does after the exchange
    scores = recipient.evaluate()
    assert scores.score == scores.score_train == donor_score and scores.score_train_stale
    assert scores.outcomes == donor_outcomes  # what a Welch test compares travels with the weights

    # the carried score and the flag survive a checkpoint (a resume scores as the uninterrupted run)
    path = tmp_path / "member_1.pt"
    ckpt.atomic_write(path, ckpt.dump_payload(member_payload(recipient, "run-a", 2, rng_state())))
    fresh = member_of(config, 1)
    fresh.restore(ckpt.load_payload(path))
    assert fresh.training_score() == donor_score and fresh.score_train_stale
    assert fresh.evaluate().outcomes == donor_outcomes

    # once an episode finishes with the new weights, they are scored by it, not by the carried score
    recipient.train(512)
    returns = [info["r"] for info in recipient.model.ep_info_buffer][-10:]
    assert returns and not recipient.score_train_stale
    assert recipient.training_score() == pytest.approx(np.mean(returns))
    assert recipient.evaluate().outcomes == tuple(returns)
    assert not recipient.evaluate().score_train_stale


def test_a_member_keeps_scoring_its_own_episodes_when_none_finish_in_a_generation(config):
    """Without an exploit the member's own earlier episodes still score it: not stale."""
    member = member_of(config, 0)
    member.train(512)
    before = member.training_score()
    assert member.training_score() == before and not member.score_train_stale
    fresh = member_of(config, 1)
    assert np.isnan(fresh.training_score()) and not fresh.score_train_stale  # never scored: NaN, not carried


def test_sampled_evaluation_actions_reach_the_policy_and_leave_trainings_random_numbers_alone(monkeypatch):
    """--eval-actions sampled: the evaluation episodes ask the policy for sampled actions (argmax by
    default), from a seed of their own (the same member after as many env steps plays the same actions,
    whatever state the process's generator is in, as on another rank), and training draws the same
    random numbers as with argmax evaluation: the weights after train, evaluate, train are bit-identical
    either way."""
    from evo.sb3 import learner as learner_module

    asked = []
    evaluate_policy = learner_module.evaluate_policy

    def recording(model, env, **kwargs):
        asked.append(kwargs["deterministic"])
        return evaluate_policy(model, env, **kwargs)

    monkeypatch.setattr(learner_module, "evaluate_policy", recording)
    weights, scores = {}, {}
    for actions, elsewhere in (("deterministic", False), ("sampled", False), ("sampled", True)):
        flags = ["--eval-episodes", "4", "--num-envs", "2", "--seed", "5", "--eval-actions", actions]
        member = member_of(parse_config(flags, check_run_dir=False), 0)
        try:
            member.train(256)
            torch_state = torch.get_rng_state()
            if elsewhere:  # as on another rank (a moved member): the process's generator in another state
                torch.manual_seed(999)
            score = member.test_score()
            if elsewhere:
                torch.set_rng_state(torch_state)
            assert torch.equal(torch.get_rng_state(), torch_state)  # the evaluation's draws were forked
            member.train(256)
            weights.setdefault(actions, []).append(member.exploit_state()["weights"].copy())
            scores.setdefault(actions, []).append(score)
        finally:
            member.close()
    assert asked == [True, False, False]
    assert np.array_equal(weights["deterministic"][0], weights["sampled"][0])
    assert np.array_equal(weights["sampled"][0], weights["sampled"][1]) and scores["sampled"][0] == scores["sampled"][1]


def test_without_evaluation_episodes_eval_actions_is_refused_by_name():
    from evo.config import ConfigError

    with pytest.raises(ConfigError, match=r"--eval-actions sampled .* give --eval-episodes N"):
        parse_config(["--eval-actions", "sampled"], check_run_dir=False)
