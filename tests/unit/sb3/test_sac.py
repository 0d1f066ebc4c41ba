"""SAC behind the learner interface (evo/sb3/sac.py, evo/sb3/offpolicy.py; real SB3, real Pendulum,
no MPI job): every tunable value reaches the next update, those SB3 reads only at construction
included; the flat state is exactly what SAC names as its state and moves bit for bit at an exploit,
the replay buffer with it on request (--exploit-buffer copy); a checkpointed member keeps its replay
buffer, loads with weights_only=True and trains on exactly as the uninterrupted one."""

import io

import numpy as np
import pytest
import stable_baselines3.sac.sac as sb3_sac
import torch
from stable_baselines3 import SAC

from evo.config import parse_config
from evo.rundir import checkpoint as ckpt
from evo.runner.session import member_factory
from evo.sb3.flat import flat_size, is_bound, named_state, state_tensors
from evo.sb3.sac import SACLearner
from tests.support import member_of
from tests.unit.sb3 import offpolicy
from tests.unit.sb3.offpolicy import (
    NEW_VALUES,
    SMALL_NETS,
    OffPolicyUpdateSpy,
    learning_rates,
    optimizers,
    replay_of,
    same_replay,
)


def sac_config(*flags):
    return offpolicy.config_of("sac", *flags)


@pytest.fixture(scope="module")
def config():
    return sac_config()


def assert_same_sac_state(a, b) -> None:
    """Networks, target networks, the three optimizers' Adam state and log_ent_coef, bit for bit."""
    offpolicy.assert_same_networks_and_optimizers(a, b, ("actor", "critic", "critic_target"))
    assert torch.equal(a.model.log_ent_coef, b.model.log_ent_coef)


# --- (1) every tunable value reaches the next update ----------------------------------------------------


class UpdateSpy(OffPolicyUpdateSpy):
    """What SAC's updates really use, recorded as they run (OffPolicyUpdateSpy: the batch sizes, the
    env steps and gradient steps of each train(), the tau of each update of the critics' targets, the
    discount read), and the entropy coefficient's gradient with the log-probs of the batch it was
    computed on."""

    sb3_module, sb3_class = sb3_sac, SAC

    def __init__(self, member, monkeypatch):
        super().__init__(member, monkeypatch)
        model = self.model
        self.entropy = []
        action_log_prob, entropy_step = model.actor.action_log_prob, model.ent_coef_optimizer.step
        log_probs = []

        def recording_action_log_prob(observations):
            actions, log_prob = action_log_prob(observations)
            log_probs.append(log_prob.detach().reshape(-1, 1).clone())
            return actions, log_prob

        def recording_entropy_step(*args, **kwargs):
            # the entropy coefficient's loss is -(log_ent_coef * (log_prob + target_entropy)).mean(), its
            # gradient -(log_prob + target_entropy).mean(), log_prob of the batch's observations
            self.entropy.append((model.log_ent_coef.grad.clone(), log_probs[-1]))
            return entropy_step(*args, **kwargs)

        monkeypatch.setattr(model.actor, "action_log_prob", recording_action_log_prob)
        monkeypatch.setattr(model.ent_coef_optimizer, "step", recording_entropy_step)


NEW = {
    **NEW_VALUES,
    "target_entropy": -0.4,
}


def test_every_tunable_value_reaches_the_next_update(config, monkeypatch):
    spec = config.agent.spec  # every value SAC may change while it trains (its networks' shape: test_architecture.py)
    assert set(NEW) == set(spec.tunable) - set(spec.architecture)
    member = member_of(config, 0)
    member.train(100)  # past learning_starts: updates ran with the YAML's values
    spy, rows = offpolicy.train_with_new_values(member, NEW, UpdateSpy, monkeypatch)

    # train_freq, gradient_steps, batch_size and gamma (SAC reads the model's own at each step)
    offpolicy.assert_collections_and_updates(member, spy)
    # tau: every target-network update
    assert spy.taus == [0.02] * 12
    # target_entropy: what the entropy coefficient's loss used, from its gradient
    assert len(spy.entropy) == 12
    for gradient, log_prob in spy.entropy:
        assert gradient.item() == pytest.approx(-(log_prob + NEW["target_entropy"]).mean().item(), rel=1e-5)
    # learning_rate: every optimizer's (three), and every value in effect
    offpolicy.assert_new_values_in_effect(member, NEW, rows, optimizer_count=3)
    assert isinstance(member.hparams["train_freq"], int)


def test_setting_the_learning_rate_naively_would_not_change_the_optimizers(config):
    """SB3 copies lr_schedule into every optimizer at each train(): model.learning_rate alone does nothing."""
    offpolicy.assert_a_naive_learning_rate_does_nothing(config, optimizer_count=3)


# --- (2) the flat state is what SAC names as its state; an exploit moves it bit for bit ---------------------


ENTROPY_COEFFICIENTS = {
    # ent_coef: auto (Pendulum's): learned, its log and that log's Adam are SAC's state
    "learned": (
        sac_config,
        ["policy", "actor.optimizer", "critic.optimizer", "ent_coef_optimizer"],
        "log_ent_coef",
    ),
    # ent_coef: 0.1 (MountainCarContinuous's, with gSDE): a constant tensor, saved as SAC's state too
    "fixed": (
        lambda: parse_config(
            ["--algo", "sac", "--env-id", "MountainCarContinuous-v0", "--hyperparams", "learning_starts:50"]
            + ["buffer_size:2000", "batch_size:32", "train_freq:8", "gradient_steps:4", SMALL_NETS],
            check_run_dir=False,
        ),
        ["policy", "actor.optimizer", "critic.optimizer"],
        "ent_coef_tensor",
    ),
}


@pytest.mark.parametrize("entropy", sorted(ENTROPY_COEFFICIENTS))
def test_the_flat_state_holds_exactly_what_sac_names_as_its_state(entropy):
    make_config, saved_names, variable = ENTROPY_COEFFICIENTS[entropy]
    member = member_of(make_config(), 0)
    model = member.model
    assert isinstance(member, SACLearner) and (model.ent_coef_optimizer is not None) is (entropy == "learned")
    assert model._get_torch_save_params() == (saved_names, [variable])
    modules, named_optimizers, variables = named_state(model)
    assert modules == [model.policy] and named_optimizers == optimizers(member) and variables == [variable]
    assert len(named_optimizers) == len(saved_names) - 1

    # the policy holds the actor, the critics and the target critics, each tensor once
    networks = [model.actor, model.critic, model.critic_target]
    tensors = offpolicy.policy_tensors(model)
    assert {id(p) for net in networks for p in net.parameters()} == set(tensors)
    named_tensor = getattr(model, variable)
    expected = sum(t.numel() for t in tensors.values()) + offpolicy.adam_size(member) + named_tensor.numel()
    assert flat_size(model) == member.buffer.size == expected
    assert member.buffer.dtype == np.float32

    # and each of them is the member's flat buffer: networks, target networks, Adam's state, the named tensor
    offpolicy.assert_in_the_flat_buffer(member, [*tensors.values(), *offpolicy.adam_state(member), named_tensor])
    end = member.buffer.ctypes.data + member.buffer.nbytes
    assert named_tensor.data_ptr() == end - 4  # the named tensor comes last
    assert state_tensors(model)[-1] is named_tensor and is_bound(model, member.buffer)
    offpolicy.assert_trains_in_place(member)  # SAC's updates work in place on the views


def test_an_exploit_copies_networks_targets_optimizers_and_entropy_coefficient_bit_exactly(config):
    donor = member_of(config, 0, {"learning_rate": 2e-3, "tau": 0.05, "target_entropy": -1.5})
    recipient = member_of(config, 1)
    donor.train(90)
    recipient.train(70)
    assert not torch.equal(donor.model.log_ent_coef, recipient.model.log_ent_coef)
    own_replay = replay_of(recipient)

    new = {**recipient.hparams, "learning_rate": 5e-4, "tau": 0.01, "train_freq": 2, "target_entropy": -0.7}
    offpolicy.exploit_weights(donor, recipient, new)

    assert_same_sac_state(donor, recipient)
    # the recipient's hyperparameters, not the donor's, are in effect
    assert recipient.hparams == new and recipient.effective_hparams() == pytest.approx(new)
    assert learning_rates(recipient) == [5e-4] * 3 and learning_rates(donor) == [2e-3] * 3
    assert (recipient.model.tau, recipient.model.target_entropy, recipient.model.train_freq.frequency) == (
        0.01,
        -0.7,
        2,
    )
    assert donor.effective_hparams()["tau"] == 0.05
    # its replay buffer is its own, as it was
    offpolicy.assert_own_replay_and_trains_on(recipient, own_replay)


@pytest.mark.parametrize(
    ("transport", "donor_steps", "recipient_steps"),
    [("p2p", 130, 60), ("collective", 130, 60), ("p2p", 60, 90)],
    ids=["p2p-full-donor", "collective-full-donor", "p2p-part-filled-donor"],
)
def test_with_exploit_buffer_copy_the_recipient_takes_the_donors_transitions(transport, donor_steps, recipient_steps):
    """Through the real exchange (on COMM_SELF): the donor's filled part of the replay buffer, its
    position and full flag travel as buffers of the exploit state, received into the recipient's
    own arrays."""
    config = offpolicy.copying_config("sac")
    donor, recipient = member_of(config, 0), member_of(config, 1)
    donor.train(donor_steps)
    recipient.train(recipient_steps)
    donors_replay = replay_of(donor)
    assert donors_replay["full"] is (donor_steps > 100) and recipient.model.replay_buffer.full is False

    offpolicy.exchange_with_the_replay_buffer(donor, recipient, transport, donors_replay)
    assert_same_sac_state(donor, recipient)
    offpolicy.assert_trains_on_the_donors_transitions(recipient, donors_replay)


# --- (3) a member survives a checkpoint with its replay buffer; (4) the payload is plain data -----------------


def test_a_checkpointed_member_keeps_its_replay_buffer_and_trains_on_bit_exactly(config, tmp_path):
    member = member_of(config, 0)
    member.train(120)
    member.scores += [-1200.5]
    path = tmp_path / "member_0.pt"
    offpolicy.write_checkpoint(member, path, "run-s", 3)

    raw = offpolicy.plain_checkpoint(path, "sac", "run-s", 3)
    assert (raw["replay"]["position"], raw["replay"]["full"]) == (120, False)
    payload = ckpt.load_payload(path)

    resumed = member_of(config, 0, env_seed=12345)  # fresh envs, as on --resume
    assert resumed.restore(payload) is None  # nothing to note: its envs and its replay buffer came back
    offpolicy.assert_resumed_as_it_was(resumed, member, assert_same_sac_state)

    offpolicy.train_alike(100, member, resumed)  # across an episode's end (Pendulum's 200 steps)
    assert resumed.pack().tobytes() == member.pack().tobytes()
    assert_same_sac_state(member, resumed)
    assert same_replay(replay_of(resumed), replay_of(member))
    assert [e["r"] for e in resumed.model.ep_info_buffer] == [e["r"] for e in member.model.ep_info_buffer] != []
    assert resumed.model._n_updates == member.model._n_updates == 170


def test_a_member_checkpointed_during_its_warm_up_trains_on_bit_exactly(config, tmp_path):
    """Before learning_starts SAC acts by sampling its action space (uniform random actions), from the
    space's own generator: a member checkpointed then (a generation shorter than learning_starts, as with
    zoo's MuJoCo settings) resumes to take the same actions as the uninterrupted one."""
    member = member_of(config, 0)
    member.train(30)  # 30 warm-up actions drawn, learning_starts is 50
    path = tmp_path / "member_0.pt"
    offpolicy.write_checkpoint(member, path, "run-s", 1)
    resumed = member_of(config, 0, env_seed=12345)  # fresh envs, as on --resume
    assert resumed.restore(ckpt.load_payload(path)) is None
    assert same_replay(replay_of(resumed), replay_of(member))

    # 20 more warm-up actions, then 20 from the policy with an update after each
    offpolicy.train_alike(40, member, resumed)
    assert same_replay(replay_of(resumed), replay_of(member))
    assert resumed.pack().tobytes() == member.pack().tobytes()


def test_a_checkpoint_without_the_replay_buffer_says_so_on_restore(config):
    member = member_of(config, 0)
    member.train(120)
    whole = ckpt.dump_payload(offpolicy.checkpoint_payload_of(member, "run-s", 2))
    lean, _, fresh = offpolicy.restore_without_the_replay_buffer(member, config, "run-s", 2)
    assert len(lean) < len(whole)
    assert_same_sac_state(member, fresh)  # the rest of the member came back
    updates = fresh.model._n_updates
    fresh.train(20)
    assert fresh.model.replay_buffer.pos == 20  # it refills as it trains
    assert fresh.model._n_updates == updates  # and does not update on a batch of 32 drawn from 20 transitions
    fresh.train(20)
    assert fresh.model.replay_buffer.size() == 40 and fresh.model._n_updates > updates  # a batch is there: it does
    assert "train" not in vars(fresh.model)  # SB3's own train() from then on

    # --no-checkpoint-buffers is what leaves it out of a run's checkpoints
    without = sac_config("--no-checkpoint-buffers")
    assert without.checkpoint_buffers is False and config.checkpoint_buffers is True
    files = member_factory(without).files({0: member}, 2)
    assert torch.load(io.BytesIO(files[0]), map_location="cpu", weights_only=True)["replay"] is None
    files = member_factory(config).files({0: member}, 2)
    assert torch.load(io.BytesIO(files[0]), map_location="cpu", weights_only=True)["replay"]["position"] == 120
