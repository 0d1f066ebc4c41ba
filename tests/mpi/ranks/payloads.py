"""What the rank tests exchange: buffers whose content says which member they came from, named
payloads of them, and donor maps of every selection (a helper of tests/mpi/ranks, not a test file)."""

import numpy as np

from evo.core.selection import truncation, winner_takes_all


def payload(member, size=1000):
    """A buffer whose content says which member it came from."""
    return np.full(size, member, dtype=np.float32) + np.arange(size, dtype=np.float32) * 1e-3


def named_payload(member, size=1000):
    """An exploit state of two named arrays of different dtypes, as a normalising learner's is
    (float32 weights and float64 statistics), both saying which member they came from."""
    return {"weights": payload(member, size), "normalization": np.full(7, member, dtype=np.float64) / 3}


def donor_maps(population):
    rng = np.random.default_rng(population)
    for trial in range(5):
        scores = list(rng.normal(size=population))
        yield truncation(scores, 0.25, np.random.default_rng(trial))
        yield truncation(scores, 0.5, np.random.default_rng(trial))
    yield winner_takes_all(list(rng.normal(size=population)))
