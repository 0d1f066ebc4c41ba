"""Every random stream of a run, in one table. Pure (numpy only).

A run is a function of its seed: every random number a member, an env, a decision or a tool draws
comes from a stream derived from ``--seed`` and a constant of this table, never from a global
generator. Two kinds:

**Seeds of a member's own things**, :func:`member_seed` ``(seed, member, stream)``, a 31-bit seed
(SB3 and gymnasium take an int):

=======================  =============================================================================
stream                   seeds
=======================  =============================================================================
``MODEL`` (0)            a member's model (its networks' initialisation, its actions) and its training
                         envs
``RESUMED_ENVS`` (2)     + the generation (an asynchronous run: the interval) it resumes at: the fresh
                         training envs of a resumed member or student (envs that are not plain data
                         start anew)
``RESEEDED_RANK`` (1000) + the generation: torch's seed for a *rank* (the second entry is the rank) of
                         a run resumed on another number of ranks, whose saved RNG states mixed
                         several old ranks'
``RESTARTED_ENVS`` (5000) + the member's failure count: the envs of a member restarted after a failure
``MOVED_ENVS`` (7e6)     + the member's env steps at the move: the envs of a member that moved to
                         another rank (asynchronous runs)
=======================  =============================================================================

The offsets keep the streams apart while a run has fewer than 998 generations (2 + g < 1000 + 0) and
a member fails fewer than 6,999,995,000 times; a member moved at env step s uses 7,000,000 + s.

**Generators of a decision**, ``np.random.default_rng([seed, ..., STREAM])``, the stream constant last:

========================  =======================================================  ====================
constant                  keyed by                                                 draws
========================  =======================================================  ====================
``INIT_STREAM``           (seed, member)                                           a member's initial
                                                                                   hyperparameters
``SELECTION_STREAM``      (seed, generation)                                       a generation's
                                                                                   selection and explore
``ASYNC_STREAM``          (seed, member, interval)                                 a ready point's
                                                                                   decision
``RESTART_STREAM``        (seed, generation, round) / (seed, member, interval,     where a failed member
                          failures)                                                starts again
``STAGE_STREAM``          (seed, stage)                                            a BG-PBT stage's
                                                                                   students
``DRAC_STREAM``           (the model's seed, its update count), a torch generator  DrAC's augmentations
``EVALUATION_STREAM``     (seed, EVALUATION_STREAM, 1): in a member id's place,    the tools' fresh
                          far above any, so no env of the run had these seeds      evaluation episodes
                          (:func:`evaluation_seed`)                                and the final pick's
``FLOOR_STREAM``          (the evaluation seed, FLOOR_STREAM)                      a study's floors: the
                                                                                   uniform-random
                                                                                   policy's actions
``EVAL_ACTIONS_STREAM``   (seed, member, env steps trained)                        torch's seed for a
                                                                                   member's sampled
                                                                                   evaluation actions
                                                                                   (``--eval-actions``)
``EVAL_ENV_STREAM``       (seed, env steps trained)                                the evaluation env's
                                                                                   seed, made anew for
                                                                                   each evaluation
                                                                                   (``--eval-episodes``)
``TIE_STREAM``            (seed, generation, member) / (seed, member, interval,    a member's priority
                          member): a seed sequence per member id                   in a tie
                                                                                   (:func:`tie_priorities`)
========================  =======================================================  ====================

**Adding a stream**: a named constant here, distinct from every other (tests/unit/core/test_streams.py
checks the table), a line in the table above saying what it is keyed by and what it draws, and a
function or call site that puts it last in the seed sequence. Never reuse a constant for a second
purpose: two draws from one stream are correlated.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

# --- member_seed's streams -------------------------------------------------------------------------
MODEL = 0
RESUMED_ENVS = 2
RESEEDED_RANK = 1000
RESTARTED_ENVS = 5000
MOVED_ENVS = 7_000_000

# --- decision generators ---------------------------------------------------------------------------
INIT_STREAM = 0x1417
SELECTION_STREAM = 0x5E1EC7
ASYNC_STREAM = 0xA5_1C
RESTART_STREAM = 0x4E57A47
STAGE_STREAM = 0x57A6E
DRAC_STREAM = 23
EVALUATION_STREAM = 0x7E57_2024
FLOOR_STREAM = 0x466C6F6F72  # ASCII "Floor"
EVAL_ACTIONS_STREAM = 0x4576416374  # ASCII "EvAct"
EVAL_ENV_STREAM = 0x4576456E76  # ASCII "EvEnv"
TIE_STREAM = 0x546965  # ASCII "Tie"

MEMBER_STREAMS = {
    "MODEL": MODEL,
    "RESUMED_ENVS": RESUMED_ENVS,
    "RESEEDED_RANK": RESEEDED_RANK,
    "RESTARTED_ENVS": RESTARTED_ENVS,
    "MOVED_ENVS": MOVED_ENVS,
}
"""member_seed's streams by name, in increasing order."""
GENERATOR_STREAMS = {
    "INIT_STREAM": INIT_STREAM,
    "SELECTION_STREAM": SELECTION_STREAM,
    "ASYNC_STREAM": ASYNC_STREAM,
    "RESTART_STREAM": RESTART_STREAM,
    "STAGE_STREAM": STAGE_STREAM,
    "DRAC_STREAM": DRAC_STREAM,
    "EVALUATION_STREAM": EVALUATION_STREAM,
    "FLOOR_STREAM": FLOOR_STREAM,
    "EVAL_ACTIONS_STREAM": EVAL_ACTIONS_STREAM,
    "EVAL_ENV_STREAM": EVAL_ENV_STREAM,
    "TIE_STREAM": TIE_STREAM,
}
"""The decision generators' constants by name."""


def eval_actions_seed(seed: int, member: int, env_steps: int) -> int:
    """torch's seed for ``member``'s sampled evaluation actions after ``env_steps`` env steps of training
    (``--eval-actions sampled``): a new draw each evaluation, the same on a resumed or moved member."""
    return int(np.random.default_rng([seed, member, env_steps, EVAL_ACTIONS_STREAM]).integers(2**63))


def eval_env_seed(seed: int, env_steps: int) -> int:
    """The seed of the evaluation env made for an evaluation after ``env_steps`` env steps of training
    (``--eval-episodes``): the env is made anew from it for each evaluation, so what an evaluation plays
    depends on the weights and this seed alone, never on the evaluations before it (a resumed, restarted or
    moved member evaluates as it would have). Every member evaluated at the same env steps (a synchronous
    generation) plays from the same starts: their scores differ by their policies, not by the luck of their
    starts (common random numbers)."""
    return int(np.random.default_rng([seed, env_steps, EVAL_ENV_STREAM]).integers(2**31 - 1))


def evaluation_seed(seed: int) -> int:
    """The env seed of fresh evaluation episodes for a run of seed ``seed``: evo-evaluate's, a study's and the
    final pick's (``--final-eval``), so that each plays the same episodes."""
    return int(np.random.SeedSequence([seed, EVALUATION_STREAM, 1]).generate_state(1)[0] % (2**31 - 1))


def tie_priorities(key: Sequence[int], members: Iterable[int]) -> dict[int, int]:
    """Each member id's priority in a tie of the decision ``key`` names (a synchronous generation's
    ``(seed, generation)``, an asynchronous ready point's ``(seed, member, interval)``): a 64-bit number
    drawn for that id alone, lower first. A function of the ids, not of where they are held, and its own
    stream: breaking ties draws nothing from the decision's generator, so a decision without a tie is
    the one it always was."""
    return {
        int(member): int(np.random.SeedSequence([*key, int(member), TIE_STREAM]).generate_state(1, np.uint64)[0])
        for member in members
    }


def member_seed(seed: int, member: int, stream: int = MODEL) -> int:
    """A 31-bit seed for ``member`` derived from the run's seed (independent streams: the table above)."""
    return int(np.random.SeedSequence([seed, member, stream]).generate_state(1)[0] % (2**31 - 1))
