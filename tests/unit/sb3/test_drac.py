"""DrAC's regulariser in PPO's update (evo/sb3/ppo.py): off, it is SB3's update bit for bit; on, a*
is a sample of the policy, V(s) a target without gradient, its draws its own generator's, and a
new aug_coef or aug_type reaches the next update; microbatches give the whole minibatch's gradient.
Real SB3, bigfish frames, the IMPALA policy."""

import math
import types

import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.distributions import make_proba_distribution

from evo.config import parse_config
from evo.learners.ppo import AUG_TYPES
from evo.sb3 import ppo as sb3_ppo
from evo.sb3.augment import AUGMENTATIONS, grayscale
from evo.sb3.ppo import drac_generator, drac_loss, sampled_actions
from tests.support import capture_logger, member_of, write_hyperparams
from tests.unit.sb3.test_ppo import assert_same_update, config_for, train_once

BLOCK = "procgen:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 2\n  n_epochs: 1\n"
"""Two minibatches of 32 bigfish frames: one update of two optimizer steps."""


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One torch thread, as a run gives each rank: on a shared 2-core machine two threads of the
    IMPALA policy's small batches mostly wait for each other (a 0.4 s update took 12 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def bigfish(tmp_path, *overrides: str, block: str = BLOCK):
    hp = write_hyperparams(tmp_path, block)
    argv = ["--env-id", "bigfish", "--conf-file", str(hp), *overrides]
    return parse_config(argv, check_run_dir=False)


def frames(n: int, seed: int = 0) -> torch.Tensor:
    """Bigfish-sized frames as SB3's rollout buffer holds them: (N, 3, 64, 64) uint8."""
    return torch.randint(0, 256, (n, 3, 64, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def identity(observations: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return observations


def trained(config, microbatch_size: int, aug_coef: float, sb3_train: bool = False):
    """A member of ``config`` after one update; its flat state and torch's global RNG state after it."""
    member = member_of(config, 0)
    member.model.microbatch_size = microbatch_size
    member.model.aug_coef = aug_coef
    if sb3_train:
        member.model.train = types.MethodType(SB3PPO.train, member.model)
    member.train(64)
    assert member.model._n_updates == 1
    state, rng = member.pack().copy(), torch.get_rng_state()
    member.close()
    return state, rng


def test_the_pure_layer_names_every_augmentation():
    assert AUG_TYPES == tuple(AUGMENTATIONS)


@pytest.mark.parametrize("microbatch_size", [0, 12], ids=["whole", "microbatched"])
def test_aug_coef_0_is_ppos_update_bit_for_bit(tmp_path, monkeypatch, microbatch_size):
    """Weights, Adam's state and torch's global RNG state after one update with aug_coef 0 are
    those of SB3's own train(); DrAC's code is never reached (it would draw random numbers)."""
    config = bigfish(tmp_path)
    sb3_state, sb3_rng = trained(config, 0, 0.0, sb3_train=True)

    def refused(*args, **kwargs):
        raise AssertionError("DrAC ran with aug_coef 0")

    for name in ("drac_generator", "drac_draws", "drac_targets", "drac_terms", "policy_outputs"):
        monkeypatch.setattr(sb3_ppo, name, refused)
    state, rng = trained(config, microbatch_size, 0.0)
    assert torch.equal(rng, sb3_rng)
    if microbatch_size == 0:
        assert np.array_equal(state, sb3_state)
    else:  # the microbatched path is SB3's update up to float rounding (test_ppo.py), not bit for bit
        assert not np.array_equal(state, member_of(config, 0).pack())  # it did train


def test_drac_changes_the_update_but_not_torchs_global_random_stream(tmp_path):
    """With aug_coef 0.1 the weights move elsewhere, deterministically (two identical members agree
    bit for bit), and torch's global RNG (the rollouts' actions) is where it is without DrAC."""
    config = bigfish(tmp_path)
    off_state, off_rng = trained(config, 0, 0.0)
    on_state, on_rng = trained(config, 0, 0.1)
    again_state, _ = trained(config, 0, 0.1)
    assert not np.array_equal(on_state, off_state)
    assert np.array_equal(on_state, again_state)
    assert torch.equal(on_rng, off_rng)


def test_the_generator_is_a_function_of_the_seed_and_the_update_count():
    """What lets a resumed member draw what it would have drawn: no state beyond its checkpoint's."""

    def draws(seed, n_updates):
        return torch.rand(4, generator=drac_generator(seed, n_updates))

    assert torch.equal(draws(7, 3), draws(7, 3))
    assert not torch.equal(draws(7, 3), draws(7, 4)) and not torch.equal(draws(7, 3), draws(8, 3))


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    """The IMPALA policy of a bigfish member (15 actions)."""
    member = member_of(bigfish(tmp_path_factory.mktemp("hp")), 0)
    yield member.model.policy
    member.close()


def fixed_action_probabilities(policy, probabilities: torch.Tensor) -> None:
    """π(·|s) = ``probabilities`` whatever s: the action head's weights 0, its biases log p."""
    with torch.no_grad():
        policy.action_net.weight.zero_()
        policy.action_net.bias.copy_(probabilities.log())


def test_a_star_is_sampled_from_the_policy_not_its_mode(policy):
    """On a policy with p(0) = 0.5 and the rest 0.5/14 each, and no augmentation, DrAC's policy term
    -mean log π(a*|s) is about the entropy (2.01) for sampled a*; the mode would give -log 0.5 = 0.69."""
    saved = {name: tensor.clone() for name, tensor in policy.state_dict().items()}
    probabilities = torch.full((15,), 0.5 / 14)
    probabilities[0] = 0.5
    fixed_action_probabilities(policy, probabilities)
    n = 256
    with torch.no_grad():
        term, _ = drac_loss(policy, frames(n), identity, torch.Generator().manual_seed(0))
    policy.load_state_dict(saved)
    surprise = -probabilities.log()
    entropy = float((probabilities * surprise).sum())
    spread = float((probabilities * (surprise - entropy) ** 2).sum().sqrt()) / math.sqrt(n)
    assert abs(float(term) - entropy) < 4 * spread
    assert float(term) - float(surprise[0]) > 10 * spread


def test_sampled_actions_follow_each_distribution_and_carry_no_gradient():
    n = 20_000
    uniforms = torch.rand(n, 3, generator=torch.Generator().manual_seed(1))
    categorical = make_proba_distribution(spaces.Discrete(3))
    logits = torch.tensor([0.7, 0.2, 0.1]).log().expand(n, 3)
    actions = sampled_actions(categorical.proba_distribution(action_logits=logits), uniforms[:, :1])
    assert actions.shape == (n,) and actions.dtype == torch.int64
    assert torch.bincount(actions, minlength=3).float().div(n).tolist() == pytest.approx([0.7, 0.2, 0.1], abs=0.015)

    gaussian = make_proba_distribution(spaces.Box(-1, 1, (3,)))
    mean = torch.tensor([1.0, -2.0, 0.0]).expand(n, 3).requires_grad_()
    log_std = torch.tensor([0.0, math.log(0.5), math.log(2.0)], requires_grad=True)
    with torch.no_grad():
        actions = sampled_actions(gaussian.proba_distribution(mean, log_std), uniforms)
    assert not actions.requires_grad
    assert actions.mean(0).tolist() == pytest.approx([1.0, -2.0, 0.0], abs=0.05)
    assert actions.std(0).tolist() == pytest.approx([1.0, 0.5, 2.0], rel=0.03)

    multi = make_proba_distribution(spaces.MultiDiscrete([2, 4]))
    actions = sampled_actions(multi.proba_distribution(action_logits=torch.zeros(n, 6)), uniforms[:, :2])
    assert actions.shape == (n, 2) and int(actions[:, 1].max()) == 3


def test_a_star_comes_from_drac_s_generator_only(policy):
    """The same generator state draws the same a* and augmentation; torch's global RNG is untouched."""
    before = torch.get_rng_state()
    first = drac_loss(policy, frames(16), AUGMENTATIONS["crop"], torch.Generator().manual_seed(3))
    second = drac_loss(policy, frames(16), AUGMENTATIONS["crop"], torch.Generator().manual_seed(3))
    other = drac_loss(policy, frames(16), AUGMENTATIONS["crop"], torch.Generator().manual_seed(4))
    assert torch.equal(torch.get_rng_state(), before)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert not torch.equal(first[0], other[0])


def gradient(policy, loss: torch.Tensor) -> torch.Tensor:
    policy.zero_grad()
    loss.backward()
    return torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None])


def test_the_value_target_is_detached(policy):
    """The value term's gradient is that of ½ mean (c - V(aug(s)))² with c a constant copy of V(s),
    and not that of ½ mean (V(s) - V(aug(s)))², whose gradient also moves V(s) towards V(aug(s))."""
    observations = frames(32)
    _, value_term = drac_loss(policy, observations, grayscale, torch.Generator().manual_seed(0))
    drac = gradient(policy, value_term)

    def values(x):
        return policy.predict_values(x).flatten()

    constant = values(observations).detach()
    detached = gradient(policy, 0.5 * (constant - values(grayscale(observations))).square().mean())
    both = gradient(policy, 0.5 * (values(observations) - values(grayscale(observations))).square().mean())
    with torch.no_grad():
        expected = 0.5 * (constant - values(grayscale(observations))).square().mean()
    assert float(value_term.detach()) == pytest.approx(float(expected))
    assert torch.allclose(drac, detached, rtol=1e-4, atol=1e-7 * float(detached.abs().max()))
    assert (drac - both).abs().max() > 0.1 * both.abs().max()


def test_microbatches_give_the_whole_minibatch_s_drac_gradient(tmp_path):
    """32-sample minibatches whole or in pieces of 12 (the last one 8), DrAC on with crop, at
    learning rate 0 so that every step's gradient is taken at the same weights: the same gradients
    and statistics, the DrAC losses included; and not the gradients of PPO without DrAC."""
    block = "procgen:\n  n_envs: 2\n  n_steps: 32\n  n_minibatches: 2\n  n_epochs: 2\n"
    drac = {"aug_coef": 0.1, "aug_type": "crop"}
    whole = train_once(config_for(tmp_path, block, 0), 64, learning_rate=0.0, **drac)
    split = train_once(config_for(tmp_path, block, 12), 64, learning_rate=0.0, **drac)
    plain = train_once(config_for(tmp_path, block, 0), 64, learning_rate=0.0)
    assert len(whole.gradients) == 4
    assert_same_update(split, whole)
    for key in ("train/drac_policy_loss", "train/drac_value_loss"):
        assert split.stats[key] == pytest.approx(whole.stats[key], rel=1e-4), key
        assert key not in plain.stats
    assert np.abs(whole.gradients[0] - plain.gradients[0]).max() > 1e-3 * np.abs(plain.gradients[0]).max()


def test_new_drac_values_reach_the_next_update_through_set_hparams(tmp_path, monkeypatch):
    """As evo sets ent_coef while a member trains (a search space explores both): a new aug_coef
    turns DrAC on and weighs it, a new aug_type is the augmentation the next update calls."""
    config = bigfish(
        tmp_path, "--hyperparams", "search_space:{aug_coef: {low: 0.0, high: 0.5}, aug_type: {choices: [crop, flip]}}"
    )
    calls = []
    for name in ("crop", "flip"):
        augmentation = AUGMENTATIONS[name]
        monkeypatch.setitem(
            AUGMENTATIONS, name, lambda x, g, name=name, aug=augmentation: calls.append(name) or aug(x, g)
        )
    member = member_of(config, 0, {"aug_coef": 0.0, "aug_type": "crop"})
    logger, writer = capture_logger()
    member.model.set_logger(logger)

    def update(hparams) -> dict:
        member.set_hparams({**member.hparams, **hparams})
        member.train(64)
        member.model.logger.dump(member.env_steps)
        return writer.rows[-1]

    off = update({})
    assert "train/drac_policy_loss" not in off and calls == []
    on = update({"aug_coef": 0.3, "aug_type": "flip"})
    assert calls == ["flip", "flip"] and member.effective_hparams()["aug_type"] == "flip"
    assert member.model.aug_coef == 0.3 and on["train/drac_policy_loss"] > 0 and on["train/drac_value_loss"] >= 0
    update({"aug_type": "crop"})
    assert calls[2:] == ["crop", "crop"]
    member.close()
