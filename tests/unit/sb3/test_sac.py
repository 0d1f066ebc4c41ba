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
from mpi4py import MPI
from stable_baselines3 import SAC
from stable_baselines3.common.type_aliases import TrainFrequencyUnit

from evo.config import parse_config
from evo.mpi import exchange
from evo.run import checkpoint_payload, make_member, snapshot
from evo.rundir import checkpoint as ckpt
from evo.sb3.learner import flat_size, is_bound, named_state, rng_state, set_rng_state, state_tensors
from evo.sb3.offpolicy import REPLAY_ARRAYS, replay_arrays
from evo.sb3.sac import SACLearner
from tests.support import capture_logger

SMALL_NETS = "policy_kwargs:{net_arch: [32, 32]}"
TINY = ["learning_starts:50", "batch_size:32", "buffer_size:2000", SMALL_NETS]
ADAM = ("step", "exp_avg", "exp_avg_sq")


def sac_config(*flags, hyperparams=TINY):
    return parse_config(
        ["--algo", "sac", "--env-id", "Pendulum-v1", *flags, "--hyperparams", *hyperparams], check_run_dir=False
    )


@pytest.fixture(scope="module")
def config():
    return sac_config()


def member_of(config, member_id, hparams=None, **kwargs):
    hparams = config.agent.defaults if hparams is None else hparams
    return make_member(config, member_id, hparams, tensorboard=False, **kwargs)


def optimizers(member):
    """SAC's optimizers: the actor's, the critics', and the entropy coefficient's if it is learned."""
    model = member.model
    return [o for o in (model.actor.optimizer, model.critic.optimizer, model.ent_coef_optimizer) if o is not None]


def learning_rates(member) -> list[float]:
    return [group["lr"] for optimizer in optimizers(member) for group in optimizer.param_groups]


def replay_of(member) -> dict:
    """The filled part of the member's replay buffer (copies), its position and full flag."""
    buffer = member.model.replay_buffer
    return {
        "arrays": {name: array.copy() for name, array in replay_arrays(buffer).items()},
        "pos": buffer.pos,
        "full": buffer.full,
    }


def same_replay(a: dict, b: dict) -> bool:
    return (
        (a["pos"], a["full"]) == (b["pos"], b["full"])
        and list(a["arrays"]) == list(b["arrays"]) == list(REPLAY_ARRAYS)
        and all(np.array_equal(a["arrays"][name], b["arrays"][name]) for name in REPLAY_ARRAYS)
    )


def assert_same_sac_state(a, b) -> None:
    """Networks, target networks, the three optimizers' Adam state and log_ent_coef, bit for bit."""
    for part in ("actor", "critic", "critic_target"):
        pairs = zip(getattr(a.model, part).parameters(), getattr(b.model, part).parameters(), strict=True)
        assert all(torch.equal(x, y) for x, y in pairs), part
    for mine, theirs in zip(optimizers(a), optimizers(b), strict=True):
        mine, theirs = mine.state_dict()["state"], theirs.state_dict()["state"]
        assert mine.keys() == theirs.keys()
        assert all(torch.equal(mine[key][name], theirs[key][name]) for key in mine for name in ADAM)
    assert torch.equal(a.model.log_ent_coef, b.model.log_ent_coef)
    assert a.pack().tobytes() == b.pack().tobytes()


# --- (1) every tunable value reaches the next update ----------------------------------------------------


class UpdateSpy:
    """What SAC's updates really use, recorded as they run: the batch sizes drawn from the replay
    buffer, the tau of each target-network update, the discount read, the env steps collected before
    each train() and its gradient steps, and the entropy coefficient's gradient with the log-probs
    of the batch it was computed on."""

    def __init__(self, member, monkeypatch):
        model = self.model = member.model
        self.batches, self.taus, self.gammas, self.updates, self.entropy = [], [], [], [], []
        sample, train, polyak = model.replay_buffer.sample, model.train, sb3_sac.polyak_update
        action_log_prob, entropy_step = model.actor.action_log_prob, model.ent_coef_optimizer.step
        log_probs = []

        def recording_sample(batch_size, env=None):
            self.batches.append(batch_size)
            return sample(batch_size, env=env)

        def recording_train(gradient_steps, batch_size):
            before = model._n_updates
            train(gradient_steps=gradient_steps, batch_size=batch_size)
            self.updates.append((model.num_timesteps, gradient_steps, batch_size, model._n_updates - before))

        def recording_polyak(params, target_params, tau):
            params, target_params = list(params), list(target_params)
            if params:  # the critics into their targets (the other call copies batch-norm statistics: none here)
                self.taus.append(tau)
            return polyak(params, target_params, tau)

        def recording_action_log_prob(observations):
            actions, log_prob = action_log_prob(observations)
            log_probs.append(log_prob.detach().reshape(-1, 1).clone())
            return actions, log_prob

        def recording_entropy_step(*args, **kwargs):
            # the entropy coefficient's loss is -(log_ent_coef * (log_prob + target_entropy)).mean(), its
            # gradient -(log_prob + target_entropy).mean(), log_prob of the batch's observations
            self.entropy.append((model.log_ent_coef.grad.clone(), log_probs[-1]))
            return entropy_step(*args, **kwargs)

        def read_gamma(instance):
            self.gammas.append(instance.__dict__["gamma"])
            return instance.__dict__["gamma"]

        def write_gamma(instance, value):
            instance.__dict__["gamma"] = value

        monkeypatch.setattr(model.replay_buffer, "sample", recording_sample)
        monkeypatch.setattr(model, "train", recording_train)
        monkeypatch.setattr(sb3_sac, "polyak_update", recording_polyak)
        monkeypatch.setattr(model.actor, "action_log_prob", recording_action_log_prob)
        monkeypatch.setattr(model.ent_coef_optimizer, "step", recording_entropy_step)
        monkeypatch.setattr(SAC, "gamma", property(read_gamma, write_gamma), raising=False)


NEW = {
    "learning_rate": 7e-4,
    "gamma": 0.95,
    "tau": 0.02,
    "batch_size": 64,
    "train_freq": 4,
    "gradient_steps": 3,
    "target_entropy": -0.4,
}


def test_every_tunable_value_reaches_the_next_update(config, monkeypatch):
    assert set(NEW) == set(config.agent.spec.tunable)  # every value SAC may change while it trains
    member = member_of(config, 0)
    member.train(100)  # past learning_starts: updates ran with the YAML's values
    effective = member.effective_hparams(list(NEW))
    assert all(effective[name] != value for name, value in NEW.items()), effective
    logger, writer = capture_logger()
    member.model.set_logger(logger)

    member.set_hparams(NEW)
    spy = UpdateSpy(member, monkeypatch)
    member.train(16)  # 4 collections of train_freq env steps, each followed by an update
    member.model.logger.dump(member.env_steps)
    monkeypatch.undo()

    # train_freq: the env steps collected between updates, and what SB3 reads at every learn()
    assert [steps for steps, *_ in spy.updates] == [104, 108, 112, 116]
    assert member.model.train_freq.frequency == 4 and member.model.train_freq.unit == TrainFrequencyUnit.STEP
    # gradient_steps: each update makes that many (SB3 counts them in _n_updates)
    assert [(gradient_steps, counted) for _, gradient_steps, _, counted in spy.updates] == [(3, 3)] * 4
    # batch_size: what every gradient step draws from the replay buffer
    assert [batch_size for _, _, batch_size, _ in spy.updates] == [64] * 4 and spy.batches == [64] * 12
    # tau: every target-network update
    assert spy.taus == [0.02] * 12
    # gamma: the discount the Q targets are computed with (SAC reads the model's own at each step)
    assert spy.gammas and set(spy.gammas) == {0.95}
    # target_entropy: what the entropy coefficient's loss used, from its gradient
    assert len(spy.entropy) == 12
    for gradient, log_prob in spy.entropy:
        assert gradient.item() == pytest.approx(-(log_prob + NEW["target_entropy"]).mean().item(), rel=1e-5)
    # learning_rate: every optimizer's, after a train step that reset them from lr_schedule
    assert learning_rates(member) == [NEW["learning_rate"]] * 3
    trained = [row for row in writer.rows if "train/learning_rate" in row][-1]
    assert trained["train/learning_rate"] == pytest.approx(NEW["learning_rate"])
    assert member.effective_hparams() == pytest.approx(NEW)
    assert member.hparams == NEW and isinstance(member.hparams["train_freq"], int)


def test_setting_the_learning_rate_naively_would_not_change_the_optimizers(config):
    """SB3 copies lr_schedule into every optimizer at each train(): model.learning_rate alone does nothing."""
    member = member_of(config, 0)
    original = member.hparams["learning_rate"]
    member.model.learning_rate = 0.123  # what a naive PBT script does
    member.train(80)
    assert member.model._n_updates > 0
    assert learning_rates(member) == [original] * 3
    member.set_hparams(dict(member.hparams, learning_rate=0.123))
    member.train(8)
    assert learning_rates(member) == [0.123] * 3


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
    policy_tensors = {id(t): t for t in [*model.policy.parameters(), *model.policy.buffers()]}
    assert {id(p) for net in networks for p in net.parameters()} == set(policy_tensors)
    adam = sum(
        1 + 2 * p.numel() for optimizer in optimizers(member) for g in optimizer.param_groups for p in g["params"]
    )
    named_tensor = getattr(model, variable)
    expected = sum(t.numel() for t in policy_tensors.values()) + adam + named_tensor.numel()
    assert flat_size(model) == member.buffer.size == expected
    assert member.buffer.dtype == np.float32

    # and each of them is the member's flat buffer: networks, target networks, Adam's state, the named tensor
    start, end = member.buffer.ctypes.data, member.buffer.ctypes.data + member.buffer.nbytes
    adam_state = [optimizer.state[p][key] for optimizer in optimizers(member) for p in optimizer.state for key in ADAM]
    assert len(adam_state) == 3 * sum(len(g["params"]) for o in optimizers(member) for g in o.param_groups)
    for tensor in [*policy_tensors.values(), *adam_state, named_tensor]:
        assert start <= tensor.data_ptr() < end
    assert named_tensor.data_ptr() == end - 4  # the named tensor comes last
    assert state_tensors(model)[-1] is named_tensor and is_bound(model, member.buffer)
    member.train(80)  # SAC's updates work in place on the views
    assert is_bound(model, member.buffer) and member.pack() is member.buffer
    assert all(float(optimizer.state[p]["step"]) > 0 for optimizer in optimizers(member) for p in optimizer.state)
    member.close()


def test_an_exploit_copies_networks_targets_optimizers_and_entropy_coefficient_bit_exactly(config):
    donor = member_of(config, 0, {**config.agent.defaults, "learning_rate": 2e-3, "tau": 0.05, "target_entropy": -1.5})
    recipient = member_of(config, 1)
    donor.train(90)
    recipient.train(70)
    assert not torch.equal(donor.model.log_ent_coef, recipient.model.log_ent_coef)
    own_replay = replay_of(recipient)

    state = donor.exploit_state()
    assert list(state) == ["weights"] and state["weights"] is donor.buffer  # the replay buffer stays the recipient's
    new = {**recipient.hparams, "learning_rate": 5e-4, "tau": 0.01, "train_freq": 2, "target_entropy": -0.7}
    recipient.load({"weights": state["weights"].copy()}, new)

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
    assert same_replay(replay_of(recipient), own_replay)
    assert np.isnan(recipient.training_score())  # its own episodes no longer score the donor's weights
    recipient.train(10)  # and it trains on from there
    assert recipient.env_steps == 80


@pytest.mark.parametrize(
    ("transport", "donor_steps", "recipient_steps"),
    [("p2p", 130, 60), ("collective", 130, 60), ("p2p", 60, 90)],
    ids=["p2p-full-donor", "collective-full-donor", "p2p-part-filled-donor"],
)
def test_with_exploit_buffer_copy_the_recipient_takes_the_donors_transitions(transport, donor_steps, recipient_steps):
    """Through the real exchange (on COMM_SELF): the donor's filled part of the replay buffer, its
    position and full flag travel as buffers of the exploit state, received into the recipient's
    own arrays."""
    config = sac_config(
        "--exploit-buffer", "copy", hyperparams=["learning_starts:50", "batch_size:32", "buffer_size:100", SMALL_NETS]
    )
    assert config.exploit_buffer == "copy"
    donor, recipient = member_of(config, 0), member_of(config, 1)
    donor.train(donor_steps)
    recipient.train(recipient_steps)
    donors_replay = replay_of(donor)
    assert donors_replay["full"] is (donor_steps > 100) and recipient.model.replay_buffer.full is False

    state = donor.exploit_state()
    assert set(state) == {"weights", "replay.position", *(f"replay.{name}" for name in REPLAY_ARRAYS)}
    assert state["replay.position"].tolist() == [donor.model.replay_buffer.pos, int(donor.model.replay_buffer.full)]
    received, sent = exchange.exchange(
        MPI.COMM_SELF,
        transport,
        {1: 0},
        lambda member: 0,
        {0: state},
        lambda r, layout: recipient.receive_buffers(layout),
    )
    assert sent == 0  # nothing left the rank
    (into,) = received.values()
    assert into["weights"] is recipient.buffer
    for name in REPLAY_ARRAYS:  # received in place, into the recipient's own replay arrays
        assert np.shares_memory(into[f"replay.{name}"], getattr(recipient.model.replay_buffer, name))
    recipient.load(into, recipient.hparams)

    assert same_replay(replay_of(recipient), donors_replay)
    assert_same_sac_state(donor, recipient)
    recipient.train(20)  # it trains on the donor's transitions, adding its own after them
    assert recipient.model.replay_buffer.pos == (donors_replay["pos"] + 20) % 100


# --- (3) a member survives a checkpoint with its replay buffer; (4) the payload is plain data -----------------


def test_a_checkpointed_member_keeps_its_replay_buffer_and_trains_on_bit_exactly(config, tmp_path):
    member = member_of(config, 0)
    member.train(120)
    member.scores += [-1200.5]
    path = tmp_path / "member_0.pt"
    ckpt.atomic_write(path, ckpt.dump_payload(checkpoint_payload(member, "run-s", 3, rng_state())))

    raw = torch.load(path, map_location="cpu", weights_only=True)  # plain data and tensors only
    assert (raw["format"], raw["algo"], raw["run_id"], raw["generation"]) == (ckpt.MEMBER_FORMAT, "sac", "run-s", 3)
    assert list(raw["replay"]["arrays"]) == list(REPLAY_ARRAYS)
    assert all(isinstance(tensor, torch.Tensor) for tensor in raw["replay"]["arrays"].values())
    assert (raw["replay"]["position"], raw["replay"]["full"]) == (120, False)
    payload = ckpt.load_payload(path)

    resumed = member_of(config, 0, env_seed=12345)  # fresh envs, as on --resume
    assert resumed.restore(payload) is None  # nothing to note: its envs and its replay buffer came back
    assert same_replay(replay_of(resumed), replay_of(member))
    assert_same_sac_state(member, resumed)
    assert resumed.hparams == member.hparams and resumed.effective_hparams() == member.effective_hparams()
    assert (resumed.env_steps, resumed.model._n_updates) == (member.env_steps, member.model._n_updates) == (120, 70)
    assert resumed.scores == [-1200.5]

    rng = rng_state()
    set_rng_state(rng)
    member.train(100)  # across an episode's end (Pendulum's 200 steps)
    set_rng_state(rng)
    resumed.train(100)
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
    ckpt.atomic_write(path, ckpt.dump_payload(checkpoint_payload(member, "run-s", 1, rng_state())))
    resumed = member_of(config, 0, env_seed=12345)  # fresh envs, as on --resume
    assert resumed.restore(ckpt.load_payload(path)) is None
    assert same_replay(replay_of(resumed), replay_of(member))

    rng = rng_state()
    set_rng_state(rng)
    member.train(40)  # 20 more warm-up actions, then 20 from the policy with an update after each
    set_rng_state(rng)
    resumed.train(40)
    assert same_replay(replay_of(resumed), replay_of(member))
    assert resumed.pack().tobytes() == member.pack().tobytes()


def test_a_checkpoint_without_the_replay_buffer_says_so_on_restore(config):
    member = member_of(config, 0)
    member.train(120)
    whole = ckpt.dump_payload(checkpoint_payload(member, "run-s", 2, rng_state()))
    lean = ckpt.dump_payload(checkpoint_payload(member, "run-s", 2, rng_state(), replay=False))
    payload = torch.load(io.BytesIO(lean), map_location="cpu", weights_only=True)
    assert payload["replay"] is None and len(lean) < len(whole)

    fresh = member_of(config, 0)
    note = fresh.restore(payload)
    assert "replay buffer was left out of the checkpoint" in note and "--no-checkpoint-buffers" in note
    assert (fresh.model.replay_buffer.pos, fresh.model.replay_buffer.full) == (0, False)
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
    _, files, _ = snapshot("run-s", {0: member}, 2, None, replay=without.checkpoint_buffers)
    assert torch.load(io.BytesIO(files[0]), map_location="cpu", weights_only=True)["replay"] is None
    _, files, _ = snapshot("run-s", {0: member}, 2, None, replay=config.checkpoint_buffers)
    assert torch.load(io.BytesIO(files[0]), map_location="cpu", weights_only=True)["replay"]["position"] == 120
