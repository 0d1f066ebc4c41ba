"""A learner of your own, outside evo: sb3-contrib's TRPO (Schulman et al. 2015), trained by evo's PBT with

    mpiexec -n 2 python pbt_rl_truct.py --algo trpo_learner:TRPOLearner --env-id Pendulum-v1

with this folder on ``PYTHONPATH`` (every rank imports the module; ``PYTHONPATH=docs/examples``). evo finds
it by the ``--algo`` text ``package.module:ClassName`` and asks of it what it asks of its own learners (docs/
architecture.md, "Where to add a learner"):

- ``spec``, a ``LearnerSpec``: its settings, each with its type, default, help, valid values (domain) and
  how a new value reaches the update while a member trains (reach: an attribute the update reads, the
  learning rate, the discount, the learner's own code, or fixed at construction, saying why), the action
  spaces it acts in, the env steps of one unit of its training, and ``hyperparams``: its YAML file of
  defaults and search spaces per env (trpo_learner.yml beside this file, rl-baselines3-zoo's layout). evo
  checks every value and search range against the declaration at start-up, and refuses what does not fit.
- the class, built as ``TRPOLearner(setup, hparams)``, with every method of evo.learners.interface.Learner
  (``learner_methods()`` lists what a run calls: training, scoring, the exploit state, the whole member
  for checkpoints and moves, TensorBoard). Subclassing ``evo.sb3.learner.SB3Learner`` gives them all for an
  SB3 algorithm: what moves at an exploit is what the algorithm names as its state
  (``_get_torch_save_params``: TRPO's policy and the value function's Adam), bound into one flat buffer.

What is TRPO's own here: the algorithm class, its settings, and the one setting whose new value needs
code to reach the update (``gae_lambda``, copied into the rollout buffer). TRPO's trust region
(``target_kl``), its conjugate-gradient damping and its critic's updates are read from the model at
every update, so PBT tunes them as plain attributes. Its line search assigns ``param.data``, putting new
tensors in place of the state evo keeps in one flat buffer; evo binds them to it again before each exploit,
and ``replaces_tensors`` says that this is expected (no warning). Tested by tests/e2e/test_own_learner.py
(a PBT run under mpiexec that exploits, explores and resumes it) and tests/unit/learners/test_own_learner.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sb3_contrib import TRPO

from evo.learners.onpolicy import gae_lambda, memory, rollout_steps
from evo.learners.spec import COUNT, DISCOUNT, POSITIVE, LearnerSpec, Reach, Values, setting
from evo.sb3.learner import SB3Learner
from evo.sb3.onpolicy import gae_lambda_of, set_gae_lambda
from evo.sb3.optimizer import EagerAdam

N_STEPS_FIXED = "it sizes the rollout buffer, allocated once, and the generation's unit"

SPEC = LearnerSpec(
    name="trpo",  # evo names it by its --algo text (trpo_learner:TRPOLearner) in the records
    title="TRPO",
    settings=(
        setting(
            "learning_rate",
            float,
            1e-3,
            "the value function's Adam step size",
            Reach.LEARNING_RATE,
            label="learning rate",
            domain=POSITIVE,
        ),
        setting("gamma", float, 0.99, "discount factor", Reach.DISCOUNT, label="discount γ", domain=DISCOUNT),
        gae_lambda(0.95),
        setting(
            "target_kl",
            float,
            0.01,
            "the KL bound of each policy step: the trust region",
            Reach.ATTRIBUTE,
            label="trust region (KL)",
            domain=POSITIVE,
        ),
        setting(
            "cg_damping",
            float,
            0.1,
            "damping of the Hessian-vector products in the conjugate-gradient solve",
            Reach.ATTRIBUTE,
            label="CG damping",
            domain=POSITIVE,
        ),
        setting(
            "n_critic_updates",
            int,
            10,
            "value-function epochs per rollout",
            Reach.ATTRIBUTE,
            label="critic updates",
            domain=COUNT,
        ),
        setting("batch_size", int, 128, "the value function's minibatch size", Reach.ATTRIBUTE, domain=COUNT),
        setting("n_steps", int, 2048, "env steps per env per rollout", why_fixed=N_STEPS_FIXED, domain=COUNT),
        setting("use_sde", bool, False, "generalised state-dependent exploration", why_fixed="it shapes the policy"),
        setting(
            "sde_sample_freq",
            int,
            -1,
            "with gSDE, a new noise matrix every this many steps (-1: at each rollout's start only)",
            why_fixed="not tuned",
            domain=COUNT | Values((-1,)),
        ),
    ),
    action_spaces=("Box", "Discrete", "MultiDiscrete", "MultiBinary"),
    policy_kwargs={"ortho_init": bool, "log_std_init": float},
    default_net_arch={"pi": (64, 64), "vf": (64, 64)},
    steps=rollout_steps,
    memory=memory,
    hyperparams=str(Path(__file__).with_suffix(".yml")),
)


class TRPOLearner(SB3Learner):
    """A TRPO member: SB3Learner's generic member with TRPO's class and its one setting of its own."""

    spec = SPEC
    algorithm = TRPO
    custom = {"gae_lambda": set_gae_lambda}
    readers = {"gae_lambda": gae_lambda_of}
    replaces_tensors = True  # TRPO's line search assigns param.data: the state is bound again at each exploit

    def policy_kwargs(self) -> dict[str, Any]:
        """The value function's optimizer: SB3's Adam (eps 1e-5) as evo's EagerAdam (no torch._dynamo)."""
        return {**super().policy_kwargs(), "optimizer_class": EagerAdam, "optimizer_kwargs": {"eps": 1e-5}}
