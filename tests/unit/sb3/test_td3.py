"""TD3 behind the learner interface (evo/sb3/td3.py, evo/sb3/offpolicy.py; real SB3, real Pendulum,
no MPI job): every tunable value reaches the next update or collection, those SB3 reads only at
construction included (the learning rate in both optimizers, the exploration noise SB3 takes as an
object and copies per env); the flat state is exactly what TD3 names as its state and moves bit for
bit at an exploit, while the recipient keeps its hyperparameters, its replay buffer (unless
--exploit-buffer copy) and its exploration noise; a checkpointed member keeps its replay buffer and
its Ornstein-Uhlenbeck noise's running value, loads with weights_only=True and trains on exactly as
the uninterrupted one."""

import io

import numpy as np
import pytest
import stable_baselines3.td3.td3 as sb3_td3
import torch
from stable_baselines3 import TD3
from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise, VectorizedActionNoise

from evo.rundir import checkpoint as ckpt
from evo.sb3.flat import flat_size, is_bound, named_state, state_tensors
from evo.sb3.rng import rng_state, set_rng_state
from evo.sb3.td3 import TD3Learner
from tests.support import member_of
from tests.unit.sb3 import offpolicy
from tests.unit.sb3.offpolicy import NEW_VALUES, OffPolicyUpdateSpy, learning_rates, optimizers, replay_of, same_replay

OU = "ornstein-uhlenbeck"
NOISE_CLASSES = {"normal": NormalActionNoise, OU: OrnsteinUhlenbeckActionNoise}


def td3_config(*flags):
    return offpolicy.config_of("td3", *flags)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One torch thread per test process, as a run gives each rank (--torch-threads): on a shared
    2-core machine two threads of tiny matrix products mostly wait for each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def config():
    return td3_config()


@pytest.fixture(scope="module")
def two_envs():
    return td3_config("--num-envs", "2")


def per_env_noises(member) -> list:
    """The exploration noise of each env: SB3's VectorizedActionNoise holds one copy per env (read
    here from SB3's own attribute, not through evo's helper)."""
    noise = member.model.action_noise
    return list(noise.noises) if isinstance(noise, VectorizedActionNoise) else [noise]


def sigmas(member) -> list[list[float]]:
    return [noise._sigma.tolist() for noise in per_env_noises(member)]


def noise_prevs(member) -> list[np.ndarray]:
    return [noise.noise_prev.copy() for noise in per_env_noises(member)]


NETWORKS = ("actor", "actor_target", "critic", "critic_target")


def assert_same_td3_state(a, b) -> None:
    """Networks, target networks and both optimizers' Adam state, bit for bit."""
    offpolicy.assert_same_networks_and_optimizers(a, b, NETWORKS)


def flat_parameters(module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).clone()


# --- (1) every tunable value reaches the next update ----------------------------------------------------


class UpdateSpy(OffPolicyUpdateSpy):
    """What TD3's updates and collections really use, recorded as they run (OffPolicyUpdateSpy: the
    batch sizes, the env steps and gradient steps of each train(), the discount read; each
    target-network update's tau, with the network it updates), the σ of the target policy's smoothing
    noise and the bound it is clipped to, each critic step (with the actor as it was then) and each
    actor step, and every exploration-noise draw (the noise object, its class and its σ)."""

    sb3_module, sb3_class = sb3_td3, TD3

    def __init__(self, member, monkeypatch):
        model = member.model
        self.targets = {id(next(getattr(model, f"{net}_target").parameters())): net for net in ("critic", "actor")}
        super().__init__(member, monkeypatch)
        self.smoothing, self.clips, self.critic_steps, self.actor_steps, self.draws = [], [], [], [], []
        critic_step, actor_step = model.critic.optimizer.step, model.actor.optimizer.step
        normal_, clamp = torch.Tensor.normal_, torch.Tensor.clamp
        drawn = set()

        def recording_critic_step(*args, **kwargs):
            self.critic_steps.append((model._n_updates, flat_parameters(model.actor)))
            return critic_step(*args, **kwargs)

        def recording_actor_step(*args, **kwargs):
            self.actor_steps.append(model._n_updates)
            return actor_step(*args, **kwargs)

        def recording_normal_(tensor, mean=0.0, std=1.0, **kwargs):
            if self.training:  # TD3.train's only draw: the target policy's smoothing noise
                self.smoothing.append((mean, std))
                drawn.add(id(tensor))
            return normal_(tensor, mean, std, **kwargs)

        def recording_clamp(tensor, *args, **kwargs):
            if id(tensor) in drawn:
                drawn.discard(id(tensor))
                self.clips.append(args)
            return clamp(tensor, *args, **kwargs)

        def recording_noise(cls):
            draw = cls.__call__

            def recording_call(noise):
                self.draws.append((noise, cls, noise._sigma.tolist()))
                return draw(noise)

            return recording_call

        monkeypatch.setattr(model.critic.optimizer, "step", recording_critic_step)
        monkeypatch.setattr(model.actor.optimizer, "step", recording_actor_step)
        monkeypatch.setattr(torch.Tensor, "normal_", recording_normal_)
        monkeypatch.setattr(torch.Tensor, "clamp", recording_clamp)
        for cls in NOISE_CLASSES.values():
            monkeypatch.setattr(cls, "__call__", recording_noise(cls))

    def target_update(self, target_params, tau):
        return self.targets[id(target_params[0])], tau


NEW = {
    **NEW_VALUES,
    "policy_delay": 4,
    "target_policy_noise": 0.35,
    "target_noise_clip": 0.3,
    "noise_type": OU,
    "noise_std": 0.25,
}


def test_every_tunable_value_reaches_the_next_update(config, monkeypatch):
    spec = config.agent.spec  # every value TD3 may change while it trains (its networks' shape: test_architecture.py)
    assert set(NEW) == set(spec.tunable) - set(spec.architecture)
    member = member_of(config, 0)
    member.train(100)  # past learning_starts: updates ran with the YAML's values
    assert member.model._n_updates == 50
    spy, rows = offpolicy.train_with_new_values(member, NEW, UpdateSpy, monkeypatch)

    # train_freq, gradient_steps, batch_size and gamma (TD3 reads the model's own at each step)
    offpolicy.assert_collections_and_updates(member, spy)
    # gradient_steps: one critic step each
    assert [n for n, _ in spy.critic_steps] == list(range(51, 63))
    # policy_delay: the actor steps once every 4 critic updates (not every 2nd, the YAML's), and its
    # parameters change then and only then
    assert spy.actor_steps == [52, 56, 60]
    actors = [actor for _, actor in spy.critic_steps] + [flat_parameters(member.model.actor)]
    for (n, _), before, after in zip(spy.critic_steps, actors[:-1], actors[1:], strict=True):
        assert (not torch.equal(before, after)) is (n in spy.actor_steps), n
    # tau: both target networks follow with it, at each delayed update only
    assert spy.taus == [("critic", 0.02), ("actor", 0.02)] * 3
    # target_policy_noise and target_noise_clip: the σ of the smoothing noise each gradient step draws, and its bound
    assert spy.smoothing == [(0, 0.35)] * 12
    assert spy.clips == [(-0.3, 0.3)] * 12
    # noise_type and noise_std: every action of the collections took its noise from one Ornstein-Uhlenbeck
    # process with the new σ (the model's own object, built when the type changed)
    noise = member.model.action_noise
    assert isinstance(noise, OrnsteinUhlenbeckActionNoise) and not isinstance(noise, VectorizedActionNoise)
    assert len(spy.draws) == 16
    assert all(drawn is noise and cls is OrnsteinUhlenbeckActionNoise for drawn, cls, _ in spy.draws)
    assert all(sigma == [0.25] for _, _, sigma in spy.draws)
    assert noise.noise_prev.any()  # it ran
    # learning_rate: both optimizers', and every value in effect
    offpolicy.assert_new_values_in_effect(member, NEW, rows, optimizer_count=2)
    assert isinstance(member.hparams["policy_delay"], int)


def test_setting_the_learning_rate_naively_would_not_change_the_optimizers(config):
    """SB3 copies lr_schedule into both optimizers at each train(): model.learning_rate alone does nothing."""
    offpolicy.assert_a_naive_learning_rate_does_nothing(config, optimizer_count=2)


def draws(member, count: int, seed: int) -> np.ndarray:
    """``count`` draws of the member's exploration noise (every env's) from numpy's generator seeded with ``seed``."""
    np.random.seed(seed)
    return np.stack([member.model.action_noise() for _ in range(count)])


def test_noise_std_reaches_every_envs_copy_of_the_noise(two_envs, monkeypatch):
    """With 2 envs SB3 deep-copies the noise into a VectorizedActionNoise at the first learn(): a new
    σ must go into each copy, which is what draws each env's noise."""
    member = member_of(two_envs, 0)
    assert isinstance(member.model.action_noise, NormalActionNoise)  # not vectorised before the first learn()
    member.train(60)  # past learning_starts, updates ran
    noise = member.model.action_noise
    assert isinstance(noise, VectorizedActionNoise) and len(noise.noises) == 2
    copies = per_env_noises(member)
    assert copies[0] is not copies[1] and all(isinstance(copy, NormalActionNoise) for copy in copies)
    assert sigmas(member) == [[0.1], [0.1]]
    before = draws(member, 4000, seed=7)

    member.set_hparams({**member.hparams, "noise_std": 0.3})
    assert member.model.action_noise is noise and per_env_noises(member) == copies  # the same objects
    assert sigmas(member) == [[0.3], [0.3]]
    assert member.effective_hparams()["noise_std"] == 0.3

    # the actions' spread: the same standard normal draws, three times as wide in every env
    after = draws(member, 4000, seed=7)
    assert after.shape == (4000, 2, 1)
    np.testing.assert_allclose(after, 3 * before, rtol=1e-6)
    assert np.std(before, axis=0).ravel() == pytest.approx([0.1, 0.1], rel=0.05)
    assert np.std(after, axis=0).ravel() == pytest.approx([0.3, 0.3], rel=0.05)
    # and those draws are what the actions get: the actor's action plus the noise, clipped to the box
    model = member.model
    deterministic = model.policy.scale_action(model.predict(model._last_obs, deterministic=True)[0])
    np.random.seed(11)
    noisy = np.stack([model._sample_action(0, model.action_noise, 2)[1] for _ in range(500)])
    np.testing.assert_array_equal(noisy, np.clip(deterministic + draws(member, 500, seed=11), -1, 1))
    assert np.std(noisy - deterministic, axis=0).ravel() == pytest.approx([0.3, 0.3], rel=0.1)

    spy = UpdateSpy(member, monkeypatch)
    member.train(20)  # 10 vectorised steps: each draws once from each env's copy, with the new σ
    monkeypatch.undo()
    assert [drawn for drawn, _, _ in spy.draws] == copies * 10
    assert all(sigma == [0.3] for _, _, sigma in spy.draws)


@pytest.mark.parametrize("before_learning", [False, True], ids=["after-the-first-learn", "before-it"])
def test_noise_type_switches_build_the_right_noise_per_env_and_keep_sigma(two_envs, monkeypatch, before_learning):
    member = member_of(two_envs, 0, {"noise_std": 0.2})
    if not before_learning:
        member.train(60)
        assert isinstance(member.model.action_noise, VectorizedActionNoise)
    for noise_type in (OU, "normal", OU):
        previous = per_env_noises(member)
        member.set_hparams({**member.hparams, "noise_type": noise_type})
        if not isinstance(member.model.action_noise, VectorizedActionNoise):
            # before the first learn(): one noise of the new type, which SB3 vectorises at that learn()
            assert before_learning and type(member.model.action_noise) is NOISE_CLASSES[noise_type]
            assert sigmas(member) == [[0.2]]
            member.train(4)
        noises = per_env_noises(member)
        assert isinstance(member.model.action_noise, VectorizedActionNoise) and len(noises) == 2
        assert all(type(noise) is NOISE_CLASSES[noise_type] for noise in noises), noises
        assert noises[0] is not noises[1] and not set(map(id, noises)) & set(map(id, previous))
        assert sigmas(member) == [[0.2], [0.2]]
        assert member.effective_hparams()["noise_type"] == noise_type
        spy = UpdateSpy(member, monkeypatch)
        member.train(8)  # the new noise is the one every env's action draws from
        monkeypatch.undo()
        assert [drawn for drawn, _, _ in spy.draws] == noises * 4
        assert {cls for _, cls, _ in spy.draws} == {NOISE_CLASSES[noise_type]}
    assert all(prev.any() for prev in noise_prevs(member))  # each env's process ran


def test_a_noise_type_switch_with_one_env_replaces_the_noise_and_keeps_sigma(config):
    member = member_of(config, 0, {"noise_std": 0.15})
    member.train(60)
    normal = member.model.action_noise
    assert type(normal) is NormalActionNoise and normal._sigma.tolist() == [0.15]
    member.set_hparams({**member.hparams, "noise_type": OU})
    assert type(member.model.action_noise) is OrnsteinUhlenbeckActionNoise  # not vectorised: one env
    assert sigmas(member) == [[0.15]] and member.model.action_noise.noise_prev.tolist() == [0.0]
    member.set_hparams({**member.hparams, "noise_type": OU, "noise_std": 0.4})
    assert sigmas(member) == [[0.4]]


# --- (2) the flat state is what TD3 names as its state; an exploit moves it bit for bit ---------------------


def test_the_flat_state_holds_exactly_what_td3_names_as_its_state(config):
    member = member_of(config, 0)
    model = member.model
    assert isinstance(member, TD3Learner)
    assert model._get_torch_save_params() == (["policy", "actor.optimizer", "critic.optimizer"], [])
    modules, named_optimizers, variables = named_state(model)
    assert modules == [model.policy] and named_optimizers == optimizers(member) and variables == []

    # the policy holds the actor, the critics and both target networks, each tensor once, nothing else
    networks = [getattr(model, part) for part in NETWORKS]
    assert [getattr(model.policy, part) for part in NETWORKS] == networks
    tensors = offpolicy.policy_tensors(model)
    per_network = [{id(p) for p in net.parameters()} for net in networks]
    assert set().union(*per_network) == set(tensors)
    assert sum(map(len, per_network)) == len(tensors)  # no tensor shared between them
    # the actor's Adam holds the actor's parameters, the critics' Adam the critics'
    for optimizer, network in zip(optimizers(member), (model.actor, model.critic), strict=True):
        assert [id(p) for g in optimizer.param_groups for p in g["params"]] == [id(p) for p in network.parameters()]
    expected = sum(t.numel() for t in tensors.values()) + offpolicy.adam_size(member)
    assert flat_size(model) == member.buffer.size == expected
    assert member.buffer.dtype == np.float32

    # and each of them is the member's flat buffer: networks, target networks, Adam's state
    adam = offpolicy.adam_state(member)
    offpolicy.assert_in_the_flat_buffer(member, [*tensors.values(), *adam])
    assert len(state_tensors(model)) == len(tensors) + len(adam) and is_bound(model, member.buffer)
    # TD3's updates (and the Polyak updates of its targets) work in place on the views
    offpolicy.assert_trains_in_place(member)


def test_an_exploit_copies_networks_targets_and_optimizers_bit_exactly(config):
    donor = member_of(config, 0, {"learning_rate": 2e-3, "tau": 0.05, "noise_std": 0.3})
    recipient = member_of(config, 1, {"noise_type": OU, "noise_std": 0.2})
    donor.train(90)
    recipient.train(70)
    assert not torch.equal(flat_parameters(donor.model.actor_target), flat_parameters(recipient.model.actor_target))
    own_replay, own_noise = replay_of(recipient), recipient.model.action_noise
    own_prev = own_noise.noise_prev.copy()
    assert own_prev.any()

    new = {**recipient.hparams, "learning_rate": 5e-4, "tau": 0.01, "policy_delay": 3, "noise_std": 0.12}
    offpolicy.exploit_weights(donor, recipient, new)

    assert_same_td3_state(donor, recipient)
    # the recipient's hyperparameters, not the donor's, are in effect
    assert recipient.hparams == new and recipient.effective_hparams() == pytest.approx(new)
    assert learning_rates(recipient) == [5e-4] * 2 and learning_rates(donor) == [2e-3] * 2
    assert (recipient.model.tau, recipient.model.policy_delay) == (0.01, 3)
    assert donor.effective_hparams()["tau"] == 0.05 and donor.model.policy_delay == 2
    # its exploration noise is its own object, mid-process as it was, with its own new σ
    assert recipient.model.action_noise is own_noise and np.array_equal(own_noise.noise_prev, own_prev)
    assert sigmas(recipient) == [[0.12]] and type(donor.model.action_noise) is NormalActionNoise
    assert sigmas(donor) == [[0.3]]
    # its replay buffer is its own, as it was
    offpolicy.assert_own_replay_and_trains_on(recipient, own_replay)


@pytest.mark.parametrize(("donor_steps", "recipient_steps"), [(130, 60), (60, 90)], ids=["full-donor", "part-filled"])
def test_with_exploit_buffer_copy_the_recipient_takes_the_donors_transitions(donor_steps, recipient_steps):
    """Through the real exchange (on COMM_SELF): the donor's filled part of the replay buffer, its
    position and full flag travel as buffers of the exploit state, received into the recipient's own
    arrays; its exploration noise stays its own."""
    config = offpolicy.copying_config("td3")
    donor, recipient = member_of(config, 0), member_of(config, 1, {"noise_type": OU})
    donor.train(donor_steps)
    recipient.train(recipient_steps)
    donors_replay, own_noise = replay_of(donor), recipient.model.action_noise

    offpolicy.exchange_with_the_replay_buffer(donor, recipient, "p2p", donors_replay)
    assert_same_td3_state(donor, recipient)
    assert recipient.model.action_noise is own_noise and recipient.hparams["noise_type"] == OU
    offpolicy.assert_trains_on_the_donors_transitions(recipient, donors_replay)


# --- (3) a member survives a checkpoint with its replay buffer and its noise; the payload is plain data --------


@pytest.mark.parametrize(
    ("noise_type", "n_envs"), [(OU, 1), (OU, 2), ("normal", 2)], ids=["ou-1-env", "ou-2-envs", "normal-2-envs"]
)
def test_a_checkpointed_member_keeps_its_replay_buffer_and_noise_and_trains_on_bit_exactly(
    tmp_path, noise_type, n_envs
):
    config = td3_config("--num-envs", str(n_envs))
    member = member_of(config, 0, {"noise_type": noise_type, "noise_std": 0.3})
    member.train(120)
    member.scores += [-1200.5]
    assert len(per_env_noises(member)) == n_envs
    path = tmp_path / "member_0.pt"
    offpolicy.write_checkpoint(member, path, "run-t", 3)

    raw = offpolicy.plain_checkpoint(path, "td3", "run-t", 3)
    assert (raw["replay"]["position"], raw["replay"]["full"]) == (120 // n_envs, False)
    if noise_type == OU:  # the running value of each env's process, exactly
        assert len(raw["noise"]) == n_envs
        for saved, prev in zip(raw["noise"], noise_prevs(member), strict=True):
            assert saved.dtype == torch.float64 and np.array_equal(saved.numpy(), prev) and prev.any()
    else:  # a normal noise has no state
        assert raw["noise"] == []
    payload = ckpt.load_payload(path)

    resumed = member_of(config, 0, env_seed=12345)  # fresh envs, as on --resume; built with the YAML's normal noise
    assert type(resumed.model.action_noise) is NormalActionNoise
    assert resumed.restore(payload) is None  # nothing to note: its envs, replay buffer and noise came back
    if noise_type == OU:  # one process per env (vectorised now, to hold each env's running value)
        assert [type(noise) for noise in per_env_noises(resumed)] == [OrnsteinUhlenbeckActionNoise] * n_envs
        assert all(np.array_equal(a, b) for a, b in zip(noise_prevs(resumed), noise_prevs(member), strict=True))
        assert sigmas(resumed) == [[0.3]] * n_envs
    else:  # stateless: one noise of the member's σ, which SB3 copies per env at the first learn()
        assert type(resumed.model.action_noise) is NormalActionNoise and sigmas(resumed) == [[0.3]]
    offpolicy.assert_resumed_as_it_was(resumed, member, assert_same_td3_state)

    # across every env's episode end (Pendulum's 200 steps): the noise resets there
    offpolicy.train_alike(320, member, resumed)
    assert resumed.pack().tobytes() == member.pack().tobytes()
    assert_same_td3_state(member, resumed)
    assert same_replay(replay_of(resumed), replay_of(member))
    assert [type(noise) for noise in per_env_noises(resumed)] == [NOISE_CLASSES[noise_type]] * n_envs
    assert sigmas(resumed) == sigmas(member) == [[0.3]] * n_envs
    if noise_type == OU:
        assert all(np.array_equal(a, b) for a, b in zip(noise_prevs(resumed), noise_prevs(member), strict=True))
    assert [e["r"] for e in resumed.model.ep_info_buffer] == [e["r"] for e in member.model.ep_info_buffer]
    assert len(member.model.ep_info_buffer) == 2  # 440 env steps: 2 episodes of 200
    assert resumed.model._n_updates == member.model._n_updates == 390


@pytest.mark.parametrize(
    ("noise_type", "n_envs"), [("normal", 1), (OU, 1), (OU, 2)], ids=["normal-1-env", "ou-1-env", "ou-2-envs"]
)
def test_the_exploration_noise_runs_on_across_a_generation_boundary(noise_type, n_envs):
    """evo trains a member one learn() per generation, and SB3's learn() resets the action noise as it
    starts. The Ornstein-Uhlenbeck process's running value is part of the member (its checkpoint keeps
    it): it runs on across the boundary as through one long learn(), so a member trained 120 then 40 env
    steps acts exactly as one trained 160 at once (a normal noise has no state: the control)."""
    config = td3_config("--num-envs", str(n_envs))
    hparams = {"noise_type": noise_type, "noise_std": 0.3}
    rng = rng_state()
    set_rng_state(rng)
    in_two = member_of(config, 0, hparams)
    in_two.train(120)
    if noise_type == OU:  # the process is under way at the boundary, in every env
        assert all(prev.any() for prev in noise_prevs(in_two))
    in_two.train(40)
    set_rng_state(rng)
    at_once = member_of(config, 0, hparams)
    at_once.train(160)
    actions = [replay_of(m)["arrays"]["actions"] for m in (in_two, at_once)]
    assert np.array_equal(actions[0][: 120 // n_envs], actions[1][: 120 // n_envs])
    assert np.array_equal(actions[0], actions[1])  # the 40 env steps after the boundary too
    assert in_two.pack().tobytes() == at_once.pack().tobytes()


def test_without_its_noise_state_a_resumed_ou_member_would_draw_other_actions(tmp_path):
    """The Ornstein-Uhlenbeck noise's running value is what makes the resumed member act as the
    uninterrupted one: restarted from zero, the same random draws give other actions."""
    config = td3_config()
    member = member_of(config, 0, {"noise_type": OU, "noise_std": 0.3})
    member.train(120)
    checkpointed = ckpt.dump_payload(offpolicy.checkpoint_payload_of(member, "run-t", 1))
    payload = torch.load(io.BytesIO(checkpointed), weights_only=True)
    assert len(payload["noise"]) == 1 and payload["noise"][0].numpy().any()
    amnesic = member_of(config, 0, env_seed=12345)
    amnesic.restore({**payload, "noise": []})
    assert amnesic.model.action_noise.noise_prev.tolist() == [0.0]
    offpolicy.train_alike(20, member, amnesic)
    actions = [replay_of(m)["arrays"]["actions"] for m in (member, amnesic)]
    assert np.array_equal(actions[0][:120], actions[1][:120])  # the transitions restored
    assert not np.array_equal(actions[0][120:], actions[1][120:])  # the actions taken since


def test_a_checkpoint_without_the_replay_buffer_says_so_and_keeps_the_noise(config):
    member = member_of(config, 0, {"noise_type": OU})
    member.train(120)
    _, payload, fresh = offpolicy.restore_without_the_replay_buffer(member, config, "run-t", 2)
    assert len(payload["noise"]) == 1
    assert_same_td3_state(member, fresh)  # the rest of the member came back, its noise included
    assert noise_prevs(fresh)[0].tolist() == noise_prevs(member)[0].tolist()
    updates = fresh.model._n_updates
    fresh.train(20)
    assert fresh.model._n_updates == updates  # no update on a batch of 32 drawn from 20 transitions
    fresh.train(20)
    assert fresh.model.replay_buffer.size() == 40 and fresh.model._n_updates > updates
