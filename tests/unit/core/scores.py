"""What the selection and plan tests (test_selection.py, test_plan.py) share: sets of scores with the
cases selection must handle."""


def score_sets(n, rng):
    """``n`` scores drawn with ``rng``, then all tied, many ties, and a NaN among them."""
    yield list(rng.normal(size=n))
    yield [1.0] * n  # all tied
    yield list(rng.integers(0, 3, size=n).astype(float))  # many ties
    yield [float("nan")] + list(rng.normal(size=n - 1)) if n > 1 else [float("nan")]
