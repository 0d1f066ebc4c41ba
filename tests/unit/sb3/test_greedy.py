"""DQN and QR-DQN behind the learner interface (evo/sb3/dqn.py, qrdqn.py, greedy.py; real SB3 and
sb3-contrib, real CartPole, no MPI job): every tunable value reaches the next update or env step, each
checked where SB3 uses it (the batches drawn, the gradient steps, the discount read, each target update's
τ and the env step it falls on, the gradient clip, Adam's rate, the ε each action is drawn with); ε
follows the member's own env steps over its whole training across learn() calls, where SB3 alone would
spend it in the first generation; the target network's step count survives a checkpoint. The state's
moves (exploit, checkpoint): test_zoo_learners.py."""

import pytest
import sb3_contrib.qrdqn.qrdqn as contrib_qrdqn
import stable_baselines3.dqn.dqn as sb3_dqn
import torch
from stable_baselines3.common.utils import LinearSchedule

from evo.config import parse_config
from evo.sb3.dqn import DQN
from evo.sb3.qrdqn import QRDQN
from evo.sb3.stock import stock_model
from tests.support import member_of
from tests.unit.sb3 import offpolicy
from tests.unit.sb3.offpolicy import NEW_VALUES, SMALL_NETS, OffPolicyUpdateSpy

TINY = ["learning_starts:50", "batch_size:32", "buffer_size:2000", "train_freq:1", "gradient_steps:1", SMALL_NETS]
BUDGET = ["--total-generations", "2", "--agent-training-steps", "100"]
"""A member trains 200 env steps in all: ε's schedule runs over them."""
MODULES = {"dqn": (sb3_dqn, sb3_dqn.DQN), "qrdqn": (contrib_qrdqn, contrib_qrdqn.QRDQN)}
NEW = {
    **NEW_VALUES,
    "target_update_interval": 6,
    "exploration_fraction": 0.9,
    "exploration_initial_eps": 0.9,
    "exploration_final_eps": 0.2,
    "max_grad_norm": 3.0,
}


def greedy_config(algo, *hyperparams):
    """``algo`` on CartPole with TINY's settings and ``hyperparams`` in place of them, 200 env steps per member."""
    given = [value for value in TINY if value.split(":")[0] not in {h.split(":")[0] for h in hyperparams}]
    return parse_config(
        ["--algo", algo, "--env-id", "CartPole-v1", *BUDGET, "--hyperparams", *given, *hyperparams], check_run_dir=False
    )


def spy_class(algo):
    module, cls = MODULES[algo]

    class UpdateSpy(OffPolicyUpdateSpy):
        """OffPolicyUpdateSpy's records, each target update with the env-step count it falls on, every
        gradient clip's norm, and the ε (with the env steps so far) of each action the policy chose."""

        sb3_module, sb3_class = module, cls

        def __init__(self, member, monkeypatch):
            super().__init__(member, monkeypatch)
            model = member.model
            self.clips, self.epsilons = [], []
            clip, predict = torch.nn.utils.clip_grad_norm_, model.predict

            def recording_clip(parameters, max_norm, *args, **kwargs):
                self.clips.append(max_norm)
                return clip(parameters, max_norm, *args, **kwargs)

            def recording_predict(*args, **kwargs):
                self.epsilons.append((model.num_timesteps, model.exploration_rate))
                return predict(*args, **kwargs)

            monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
            monkeypatch.setattr(model, "predict", recording_predict)

        def target_update(self, target_params, tau):
            return self.model._n_calls, tau

    return UpdateSpy


@pytest.mark.parametrize("algo", list(MODULES))
def test_every_tunable_value_reaches_the_next_update(algo, monkeypatch):
    config = greedy_config(algo)
    spec = config.agent.spec
    assert set(NEW) == set(spec.tunable) - set(spec.architecture)
    member = member_of(config, 0)
    assert isinstance(member.model, (DQN, QRDQN)[list(MODULES).index(algo)])
    member.train(100)  # past learning_starts: updates ran with the YAML's values
    assert member.model._n_updates == 50
    spy, rows = offpolicy.train_with_new_values(member, NEW, spy_class(algo), monkeypatch)

    # train_freq, gradient_steps, batch_size and gamma
    offpolicy.assert_collections_and_updates(member, spy)
    # tau and target_update_interval: a Polyak step of 0.02 at every 6th env step (101..116: 102, 108, 114)
    assert spy.taus == [(102, 0.02), (108, 0.02), (114, 0.02)]
    # max_grad_norm: each of the 12 gradient steps clipped at the new norm
    assert spy.clips == [3.0] * 12
    # the exploration settings: each action's ε is the new schedule's at the member's env steps out of 200
    schedule = LinearSchedule(0.9, 0.2, 0.9)
    assert [steps for steps, _ in spy.epsilons] == list(range(100, 116))
    assert all(epsilon == pytest.approx(schedule(1 - steps / 200)) for steps, epsilon in spy.epsilons)
    # learning_rate: Adam's (SB3 resets it from lr_schedule at each train()), and what train() logged
    assert [group["lr"] for group in member.model.policy.optimizer.param_groups] == [7e-4]
    assert [row for row in rows if "train/learning_rate" in row][-1]["train/learning_rate"] == pytest.approx(7e-4)
    assert member.effective_hparams() == pytest.approx(NEW) and member.hparams == NEW


@pytest.mark.parametrize("algo", list(MODULES))
def test_epsilon_falls_over_the_members_whole_training_not_one_generation(algo):
    """Two generations of 100 env steps, ε over all 200: at the end of the first generation it is half way
    down, and the second generation goes on from there to its final value (SB3 alone counts the progress
    of each learn(): it would be at its final value after the first generation, and stay there). The export's
    model holds it where training left it (it held 0, where rl_zoo3's saved agent holds its final ε)."""
    config = greedy_config(algo, "exploration_fraction:1.0", "learning_starts:0")
    member = member_of(config, 0)
    assert member.model.exploration_budget == 200
    start, end = member.model.exploration_initial_eps, member.model.exploration_final_eps
    assert start - end > 0.5
    member.train(100)
    assert member.model.exploration_rate == pytest.approx((start + end) / 2)
    assert member.model.exploration_schedule(member.model._current_progress_remaining) == pytest.approx(end)  # SB3's
    member.train(50)
    assert member.model.exploration_rate == pytest.approx(start + (end - start) * 150 / 200)
    member.train(50)
    assert member.model.exploration_rate == pytest.approx(end)
    exported = stock_model(member)  # what evo-export saves: ε where training left it, as rl_zoo3's train saves it
    assert (exported.exploration_rate, exported._n_calls) == (member.model.exploration_rate, 200)


@pytest.mark.parametrize("algo", list(MODULES))
def test_a_checkpoint_keeps_the_target_networks_step_count_and_epsilon(algo):
    config = greedy_config(algo, "target_update_interval:7")
    member = member_of(config, 0)
    member.train(75)
    payload = offpolicy.checkpoint_payload_of(member, "run-g", 1)
    assert payload["n_calls"] == member.model._n_calls == 75
    resumed = member_of(config, 0, env_seed=99)
    resumed.restore(payload)
    assert resumed.model._n_calls == 75
    assert resumed.model.exploration_rate == member.model.exploration_rate > 0
    offpolicy.train_alike(30, member, resumed)  # the target updates at 77, 84, 91, 98 in both
    assert resumed.pack().tobytes() == member.pack().tobytes()
