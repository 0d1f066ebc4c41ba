"""TV.EXP3.M and DepRound (evo.core.explorers.exp3), pure: what the bandit promises, with fixed seeds."""

import math

import numpy as np
import pytest

from evo.core.explorers.exp3 import TVExp3M, dep_round, exploration_rate, normalise_rewards


def test_the_exploration_rate_is_the_papers_and_clipped_to_one():
    # K = 8 augmentations, B = 4 members, T = 50 rounds: the paper's set-up
    assert exploration_rate(8, 4, 50) == pytest.approx(math.sqrt(8 * math.log(2) / ((math.e - 1) * 4 * 5)))
    assert exploration_rate(8, 4, 50) == pytest.approx(0.40, abs=0.01)
    assert exploration_rate(8, 4, 8) == 1.0 and exploration_rate(8, 4, 1) == 1.0  # the formula passes 1
    assert exploration_rate(8, 4, 9) < 1.0
    assert exploration_rate(2, 4, 50) == 0.2  # B >= K: the paper's constant


@pytest.mark.parametrize("rounds", [1, 3, 8, 50])
def test_inclusion_probabilities_are_probabilities_at_every_horizon(rounds):
    bandit = TVExp3M(8, 4, rounds)
    rng = np.random.default_rng(rounds)
    for _ in range(12):
        q, capped = bandit.inclusion()
        assert q.sum() == pytest.approx(4.0) and np.all(q > 0) and np.all(q <= 1 + 1e-9)
        assert np.allclose(q[capped], 1.0)
        arms = bandit.draw(4, rng)
        assert len(set(arms)) == 4
        bandit.update(arms, [1.0 if arm == 0 else 0.0 for arm in arms])


def test_a_dominant_weight_is_capped_so_its_arm_is_played_with_probability_one():
    bandit = TVExp3M(8, 4, 50, weights=np.array([0.9] + [0.1 / 7] * 7))
    q, capped = bandit.inclusion()
    assert capped.tolist() == [True] + [False] * 7
    assert q[0] == pytest.approx(1.0) and q.sum() == pytest.approx(4.0)
    before = bandit.weights.copy()
    bandit.update([0], [1.0])  # a capped arm is not rewarded: it only gets the fixed share
    share = math.e * bandit.omega / 8
    expected = (before + share) / (before + share).sum()
    assert np.allclose(bandit.weights, expected)


def play(bandit, best_of_round, rounds, rng, start=1):
    """Each round the bandit draws B arms; the best arm pays 0.9, the others 0.2, plus noise in [0, 0.1]."""
    history = []
    for round_ in range(start, start + rounds):
        arms = bandit.draw(bandit.batch, rng)
        best = best_of_round(round_)
        rewards = [(0.9 if arm == best else 0.2) + rng.uniform(0, 0.1) for arm in arms]
        bandit.update(arms, rewards)
        history += [(round_, arm, reward) for arm, reward in zip(arms, rewards, strict=True)]
    return history


def test_on_a_stationary_bandit_the_mass_goes_to_the_best_arm():
    for seed in range(5):
        bandit = TVExp3M(8, 4, 50)
        play(bandit, lambda r: 5, 50, np.random.default_rng(seed))
        q, _ = bandit.inclusion()
        assert int(np.argmax(bandit.weights)) == 5
        # B = 4 of the 8 arms are played each round: the best arm (nearly) always, at the cap of 1,
        # and the 3 other plays spread over the 7 others
        assert q[5] > 0.95 and q[5] > np.delete(q, 5).max() + 0.3


def test_when_the_best_arm_switches_the_bandit_follows_within_a_bounded_number_of_rounds():
    lags = []
    for seed in range(10):
        bandit = TVExp3M(8, 4, 50)
        rng = np.random.default_rng(seed)
        play(bandit, lambda r: 2, 25, rng)
        assert int(np.argmax(bandit.weights)) == 2
        for lag in range(1, 26):
            play(bandit, lambda r: 6, 1, rng, start=25 + lag)
            if bandit.weights[6] > bandit.weights[2]:
                lags.append(lag)
                break
        else:
            pytest.fail(f"seed {seed}: arm 6 never overtook arm 2 in 25 rounds")
    assert np.median(lags) <= 10, lags  # measured: 12, 6, 6, 6, 14, 22, 10, 7, 6, 9


def test_the_fixed_share_reaches_every_arm_each_round():
    # arm 7 has all but vanished and is not played: the share alone brings it back above e·ω/K
    weights = np.array([0.3, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02, 1e-12])
    bandit = TVExp3M(8, 4, 50, weights=weights / weights.sum())
    bandit.update([0, 1, 2, 3], [1.0, 0.5, 0.2, 0.0])
    share = math.e * bandit.omega / 8
    assert bandit.weights[7] > share / 2  # normalised by a sum a little above 1
    q, _ = bandit.inclusion()
    assert q.min() >= 4 * bandit.gamma / 8 - 1e-12  # and every arm keeps γ/K of every draw


def test_replaying_the_history_rebuilds_the_bandit():
    bandit = TVExp3M(8, 4, 30)
    history = play(bandit, lambda r: 3 if r < 10 else 1, 20, np.random.default_rng(4))
    again = TVExp3M.replay(8, 4, 30, reversed(history))  # in any order: rounds are replayed in order
    assert np.allclose(again.weights, bandit.weights)


def test_dep_round_draws_k_distinct_arms_with_exactly_the_inclusion_probabilities():
    probabilities = np.array([0.9, 0.5, 0.3, 0.2, 0.1])  # k = 2
    rng = np.random.default_rng(0)
    draws = 20_000
    counts = np.zeros(5)
    for _ in range(draws):
        chosen = dep_round(probabilities, rng)
        assert len(chosen) == 2 and len(set(chosen)) == 2
        counts[chosen] += 1
    frequencies = counts / draws
    tolerance = 4 * np.sqrt(probabilities * (1 - probabilities) / draws)  # 4 standard errors (<= 0.009)
    assert np.all(np.abs(frequencies - probabilities) < tolerance), (frequencies, tolerance)
    assert dep_round([1.0, 0.0, 1.0], rng) == [0, 2]
    with pytest.raises(ValueError, match="whole-number sum"):
        dep_round([0.5, 0.4], rng)


def test_draws_for_fewer_recipients_keep_each_arms_share():
    bandit = TVExp3M(8, 4, 50, weights=np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.03, 0.01, 0.01]))
    q, _ = bandit.inclusion()
    rng = np.random.default_rng(1)
    counts = np.zeros(8)
    draws = 10_000
    for _ in range(draws):
        arms = bandit.draw(2, rng)  # a generation with 2 recipients
        assert len(set(arms)) == 2
        counts[arms] += 1
    expected = 2 * q / 4
    assert np.all(np.abs(counts / draws - expected) < 4 * np.sqrt(expected * (1 - expected) / draws) + 1e-3)


def test_with_more_members_than_arms_recipients_draw_independently():
    bandit = TVExp3M(2, 4, 50)
    arms = bandit.draw(4, np.random.default_rng(0))
    assert len(arms) == 4 and set(arms) <= {0, 1}


def test_rewards_are_scaled_to_the_unit_interval():
    assert normalise_rewards([2.0, -1.0, 0.5]).tolist() == [1.0, 0.0, 0.5]
    assert normalise_rewards([3.0, 3.0]).tolist() == [0.5, 0.5]
    assert normalise_rewards([]).size == 0
