"""What the off-policy learners' tests (test_sac.py, test_td3.py) share: a small Pendulum config and
its members, their optimizers and replay buffers, bit-for-bit comparisons of two members, a spy on the
values SB3's updates really use, and the steps of an exploit, a checkpoint and a resume."""

import io

import numpy as np
import pytest
import torch
from mpi4py import MPI
from stable_baselines3.common.type_aliases import TrainFrequencyUnit

from evo.config import parse_config
from evo.mpi import exchange
from evo.rundir import checkpoint as ckpt
from evo.rundir.checkpoint import member_payload
from evo.sb3.flat import is_bound
from evo.sb3.offpolicy import REPLAY_ARRAYS, replay_arrays
from evo.sb3.rng import rng_state, set_rng_state
from tests.support import capture_logger, member_of

SMALL_NETS = "policy_kwargs:{net_arch: [32, 32]}"
TINY = ["learning_starts:50", "batch_size:32", "buffer_size:2000", SMALL_NETS]
SMALL_REPLAY = ["learning_starts:50", "batch_size:32", "buffer_size:100", SMALL_NETS]
"""A replay buffer of 100 transitions: full after 100 env steps of one env."""
ADAM = ("step", "exp_avg", "exp_avg_sq")
NEW_VALUES = {"learning_rate": 7e-4, "gamma": 0.95, "tau": 0.02, "batch_size": 64, "train_freq": 4, "gradient_steps": 3}
"""New values (none the YAML's) of the settings every off-policy learner tunes: assert_collections_and_updates
checks train_freq's, gradient_steps', batch_size's and gamma's."""


def config_of(algo, *flags, hyperparams=TINY):
    return parse_config(
        ["--algo", algo, "--env-id", "Pendulum-v1", *flags, "--hyperparams", *hyperparams], check_run_dir=False
    )


def copying_config(algo):
    """``--exploit-buffer copy`` with a replay buffer of 100 transitions."""
    config = config_of(algo, "--exploit-buffer", "copy", hyperparams=SMALL_REPLAY)
    assert config.exploit_buffer == "copy"
    return config


def optimizers(member):
    """The member's optimizers: the actor's, the critics', and SAC's entropy coefficient's if it is learned."""
    model = member.model
    entropy = getattr(model, "ent_coef_optimizer", None)
    return [o for o in (model.actor.optimizer, model.critic.optimizer, entropy) if o is not None]


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


def assert_same_networks_and_optimizers(a, b, networks) -> None:
    """The ``networks`` (model attributes), every optimizer's Adam state and the flat buffer, bit for bit."""
    for part in networks:
        pairs = zip(getattr(a.model, part).parameters(), getattr(b.model, part).parameters(), strict=True)
        assert all(torch.equal(x, y) for x, y in pairs), part
    for mine, theirs in zip(optimizers(a), optimizers(b), strict=True):
        mine, theirs = mine.state_dict()["state"], theirs.state_dict()["state"]
        assert mine.keys() == theirs.keys()
        assert all(torch.equal(mine[key][name], theirs[key][name]) for key in mine for name in ADAM)
    assert a.pack().tobytes() == b.pack().tobytes()


# --- the values SB3's updates use --------------------------------------------------------------------------


class OffPolicyUpdateSpy:
    """What the updates really use, recorded as they run: the batch sizes drawn from the replay buffer,
    the env steps collected before each train() and its gradient steps, each target-network update's
    tau (``target_update``) and the discount read. ``training`` is true while train() runs. A learner's
    spy names the SB3 module whose polyak_update the targets follow with (None: it has no targets), and
    SB3's class whose gamma is read."""

    sb3_module = None
    sb3_class = None

    def __init__(self, member, monkeypatch):
        model = self.model = member.model
        self.batches, self.updates, self.taus, self.gammas = [], [], [], []
        self.training = False
        sample, train = model.replay_buffer.sample, model.train
        polyak = getattr(self.sb3_module, "polyak_update", None)

        def recording_sample(batch_size, env=None):
            self.batches.append(batch_size)
            return sample(batch_size, env=env)

        def recording_train(gradient_steps, batch_size):
            before = model._n_updates
            self.training = True
            try:
                train(gradient_steps=gradient_steps, batch_size=batch_size)
            finally:
                self.training = False
            self.updates.append((model.num_timesteps, gradient_steps, batch_size, model._n_updates - before))

        def recording_polyak(params, target_params, tau):
            params, target_params = list(params), list(target_params)
            if params:  # the networks into their targets (the other calls copy batch-norm statistics: none here)
                self.taus.append(self.target_update(target_params, tau))
            return polyak(params, target_params, tau)

        def read_gamma(instance):
            self.gammas.append(instance.__dict__["gamma"])
            return instance.__dict__["gamma"]

        def write_gamma(instance, value):
            instance.__dict__["gamma"] = value

        monkeypatch.setattr(model.replay_buffer, "sample", recording_sample)
        monkeypatch.setattr(model, "train", recording_train)
        if self.sb3_module is not None:  # a learner without target networks (CrossQ) names none
            monkeypatch.setattr(self.sb3_module, "polyak_update", recording_polyak)
        monkeypatch.setattr(self.sb3_class, "gamma", property(read_gamma, write_gamma), raising=False)

    def target_update(self, target_params, tau):
        """What a target network's update records."""
        return tau


def train_with_new_values(member, new: dict, spy_class, monkeypatch):
    """Sets ``new`` (every value other than the one in effect) and trains 16 env steps under a
    ``spy_class`` spy, logging to a capturing logger. Returns (spy, the rows logged)."""
    effective = member.effective_hparams(list(new))
    assert all(effective[name] != value for name, value in new.items()), effective
    logger, writer = capture_logger()
    member.model.set_logger(logger)

    member.set_hparams(new)
    spy = spy_class(member, monkeypatch)
    member.train(16)  # 4 collections of train_freq env steps, each followed by an update
    member.model.logger.dump(member.env_steps)
    monkeypatch.undo()
    return spy, writer.rows


def assert_collections_and_updates(member, spy) -> None:
    """train_freq 4, gradient_steps 3, batch_size 64 and gamma 0.95 in effect from env step 100."""
    # train_freq: the env steps collected between updates, and what SB3 reads at every learn()
    assert [steps for steps, *_ in spy.updates] == [104, 108, 112, 116]
    assert member.model.train_freq.frequency == 4 and member.model.train_freq.unit == TrainFrequencyUnit.STEP
    # gradient_steps: each update makes that many (SB3 counts them in _n_updates)
    assert [(gradient_steps, counted) for _, gradient_steps, _, counted in spy.updates] == [(3, 3)] * 4
    # batch_size: what every gradient step draws from the replay buffer
    assert [batch_size for _, _, batch_size, _ in spy.updates] == [64] * 4 and spy.batches == [64] * 12
    # gamma: the discount the Q targets are computed with (the learner reads the model's own at each step)
    assert spy.gammas and set(spy.gammas) == {0.95}


def assert_new_values_in_effect(member, new: dict, rows: list[dict], optimizer_count: int) -> None:
    """The learning rate of ``new`` in each of the ``optimizer_count`` optimizers, after a train step
    that reset them from lr_schedule, and in what train() logged; every value of ``new`` in effect."""
    assert learning_rates(member) == [new["learning_rate"]] * optimizer_count
    trained = [row for row in rows if "train/learning_rate" in row][-1]
    assert trained["train/learning_rate"] == pytest.approx(new["learning_rate"])
    assert member.effective_hparams() == pytest.approx(new)
    assert member.hparams == new


def assert_a_naive_learning_rate_does_nothing(config, optimizer_count: int) -> None:
    """SB3 copies lr_schedule into every optimizer at each train(): model.learning_rate alone does
    nothing, set_hparams reaches all ``optimizer_count``."""
    member = member_of(config, 0)
    original = member.hparams["learning_rate"]
    member.model.learning_rate = 0.123  # what a naive PBT script does
    member.train(80)
    assert member.model._n_updates > 0
    assert learning_rates(member) == [original] * optimizer_count
    member.set_hparams(dict(member.hparams, learning_rate=0.123))
    member.train(8)
    assert learning_rates(member) == [0.123] * optimizer_count


# --- the flat state ----------------------------------------------------------------------------------------


def policy_tensors(model) -> dict:
    """{id: tensor} of the policy's parameters and buffers."""
    return {id(t): t for t in [*model.policy.parameters(), *model.policy.buffers()]}


def adam_size(member) -> int:
    """The floats of every optimizer's Adam state: a step count and two moments per parameter."""
    return sum(1 + 2 * p.numel() for o in optimizers(member) for g in o.param_groups for p in g["params"])


def adam_state(member) -> list:
    """Every optimizer's Adam state tensors, three per parameter."""
    state = [optimizer.state[p][key] for optimizer in optimizers(member) for p in optimizer.state for key in ADAM]
    assert len(state) == 3 * sum(len(g["params"]) for o in optimizers(member) for g in o.param_groups)
    return state


def assert_in_the_flat_buffer(member, tensors) -> None:
    start, end = member.buffer.ctypes.data, member.buffer.ctypes.data + member.buffer.nbytes
    for tensor in tensors:
        assert start <= tensor.data_ptr() < end


def assert_trains_in_place(member) -> None:
    """The updates work in place on the flat buffer's views; then the member is closed."""
    member.train(80)
    assert is_bound(member.model, member.buffer) and member.pack() is member.buffer
    assert all(float(optimizer.state[p]["step"]) > 0 for optimizer in optimizers(member) for p in optimizer.state)
    member.close()


# --- exploits ----------------------------------------------------------------------------------------------


def exploit_weights(donor, recipient, new: dict) -> None:
    """An exploit without the replay buffer: the donor's flat state into the recipient, with ``new``."""
    state = donor.exploit_state()
    assert list(state) == ["weights"] and state["weights"] is donor.buffer  # the replay buffer stays the recipient's
    recipient.load({"weights": state["weights"].copy()}, new)


def assert_own_replay_and_trains_on(recipient, own_replay: dict) -> None:
    """After an exploit: the recipient's replay buffer is its own, as it was, and it trains on (it had 70 env steps)."""
    assert same_replay(replay_of(recipient), own_replay)
    assert np.isnan(recipient.training_score())  # its own episodes no longer score the donor's weights
    recipient.train(10)  # and it trains on from there
    assert recipient.env_steps == 80


def exchange_with_the_replay_buffer(donor, recipient, transport: str, donors_replay: dict) -> None:
    """An exploit with --exploit-buffer copy through the real exchange (on COMM_SELF): the donor's
    filled part of the replay buffer (``donors_replay``), its position and full flag travel as buffers
    of the exploit state, received in place into the recipient's own arrays."""
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


def assert_trains_on_the_donors_transitions(recipient, donors_replay: dict) -> None:
    recipient.train(20)  # it trains on the donor's transitions, adding its own after them
    assert recipient.model.replay_buffer.pos == (donors_replay["pos"] + 20) % 100


# --- checkpoints -------------------------------------------------------------------------------------------


def write_checkpoint(member, path, run_id: str, generation: int) -> None:
    ckpt.atomic_write(path, ckpt.dump_payload(checkpoint_payload_of(member, run_id, generation)))


def checkpoint_payload_of(member, run_id: str, generation: int, **kwargs) -> dict:
    """What a run checkpoints of the member (``replay=False``: without its replay buffer)."""
    return member_payload(member, run_id, generation, rng_state(), **kwargs)


def plain_checkpoint(path, algo: str, run_id: str, generation: int) -> dict:
    """The checkpoint at ``path`` as plain data and tensors only (weights_only), with the replay buffer's arrays."""
    raw = torch.load(path, map_location="cpu", weights_only=True)
    identity = (raw["format"], raw["algo"], raw["run_id"], raw["generation"])
    assert identity == (ckpt.MEMBER_FORMAT, algo, run_id, generation)
    assert list(raw["replay"]["arrays"]) == list(REPLAY_ARRAYS)
    assert all(isinstance(tensor, torch.Tensor) for tensor in raw["replay"]["arrays"].values())
    return raw


def assert_resumed_as_it_was(resumed, member, assert_same_state) -> None:
    """A member checkpointed after 120 env steps (70 updates) with the score -1200.5, and the one
    resumed from it: the same replay buffer, state (``assert_same_state``), values and counts."""
    assert same_replay(replay_of(resumed), replay_of(member))
    assert_same_state(member, resumed)
    assert resumed.hparams == member.hparams and resumed.effective_hparams() == member.effective_hparams()
    assert (resumed.env_steps, resumed.model._n_updates) == (member.env_steps, member.model._n_updates) == (120, 70)
    assert resumed.scores == [-1200.5]


def train_alike(steps: int, *members) -> None:
    """Trains each of ``members`` ``steps`` env steps from the same random state."""
    rng = rng_state()
    for member in members:
        set_rng_state(rng)
        member.train(steps)


def restore_without_the_replay_buffer(member, config, run_id: str, generation: int):
    """The member's checkpoint without its replay buffer (as --no-checkpoint-buffers writes it),
    restored into a fresh member of ``config``, which says so and starts with an empty buffer.
    Returns (the checkpoint's bytes, its payload, the fresh member)."""
    lean = ckpt.dump_payload(checkpoint_payload_of(member, run_id, generation, replay=False))
    payload = torch.load(io.BytesIO(lean), map_location="cpu", weights_only=True)
    assert payload["replay"] is None
    fresh = member_of(config, 0)
    note = fresh.restore(payload)
    assert "replay buffer was left out of the checkpoint" in note and "--no-checkpoint-buffers" in note
    assert (fresh.model.replay_buffer.pos, fresh.model.replay_buffer.full) == (0, False)
    return lean, payload, fresh
