"""The exponential-mechanism median against diffprivlib's ``tools.median`` (the same law).

Both release a point of [lower, upper]: pick the gap [x_(i), x_(i+1)] between sorted records (with
x_(0) = lower, x_(n+1) = upper) with probability proportional to its width times
exp(-epsilon/2 |i - n/2|), then a uniform point in it (Smith 2011; diffprivlib's ``quantile`` with
``quant=0.5`` builds exactly this exponential mechanism). Categories: each gap split into halves, so
the test sees both the choice of the gap and the uniform point in it.
"""

import jax
import numpy as np
import pytest

from tests.crosscheck import _common as c

REASON = "the crosscheck extra is not installed (pip install -e '.[crosscheck]')"
diffprivlib = pytest.importorskip("diffprivlib", reason=REASON)

from diffprivlib.accountant import BudgetAccountant  # noqa: E402

from gpuprivacy import mechanisms  # noqa: E402

DATA = np.array([0.5, 1.0, 2.0, 3.0, 3.5, 5.0, 6.0, 8.0, 9.0])
EPSILON, LOWER, UPPER = 3.0, 0.0, 10.0
WRONG = 1.1  # power checks: epsilon / 1.1
SPLIT = 2
NUM_OURS = 100_000
NUM_PEER = 25_000  # diffprivlib draws one median per call (~0.15 ms each)


def median_law(data, epsilon, lower, upper, split):
    edges = np.concatenate([[lower], np.sort(data), [upper]])
    n = len(data)
    weights = np.diff(edges) * np.exp(-epsilon / 2 * np.abs(np.arange(n + 1) - n / 2))
    law = np.repeat(weights / weights.sum() / split, split)
    left = (edges[:-1, None] + np.diff(edges)[:, None] * np.arange(split) / split).reshape(-1)
    return np.concatenate([left, [upper]]), law


def _ours(epsilon, seed):
    keys = jax.random.split(jax.random.key(seed), NUM_OURS)
    run = jax.vmap(lambda k: mechanisms.exponential_mechanism_median(k, DATA, epsilon=epsilon, lower=LOWER,
                                                                     upper=UPPER).value)
    return np.asarray(run(keys))


def test_exponential_median_law(comparison):
    edges, law = median_law(DATA, EPSILON, LOWER, UPPER, SPLIT)
    _, wrong_law = median_law(DATA, EPSILON / WRONG, LOWER, UPPER, SPLIT)
    edges = edges.copy()
    edges[-1] = np.nextafter(UPPER, np.inf)  # the last category is closed: it holds `upper`
    ours, ours_wrong = _ours(EPSILON, 41), _ours(EPSILON / WRONG, 42)
    random_state = np.random.RandomState(43)
    # A fresh accountant per call: the default one would keep every spend (and slow down quadratically).
    theirs = np.array([c.peer(diffprivlib.tools.median, DATA, epsilon=EPSILON, bounds=(LOWER, UPPER),
                              random_state=random_state, accountant=BudgetAccountant())
                       for _ in range(NUM_PEER)])
    assert np.all((LOWER <= ours) & (ours <= UPPER)) and np.all((LOWER <= theirs) & (theirs <= UPPER))
    c.check_law(comparison, topic="exponential-median-law", quantity="law of exponential_mechanism_median",
                parameters={"data": DATA.tolist(), "epsilon": EPSILON, "lower": LOWER, "upper": UPPER,
                            "categories": f"each gap split in {SPLIT}"},
                ours_call=f"mechanisms.exponential_mechanism_median(key, data, epsilon={EPSILON}, lower={LOWER}, "
                          f"upper={UPPER}), {NUM_OURS} keys",
                library="diffprivlib",
                peer_call=f"tools.median(data, epsilon={EPSILON}, bounds=({LOWER}, {UPPER}), random_state=rs, "
                          f"accountant=BudgetAccountant()), {NUM_PEER} draws",
                law=law, wrong_law=wrong_law, ours_counts=c.counts(ours, edges), peer_counts=c.counts(theirs, edges),
                ours_wrong_counts=c.counts(ours_wrong, edges), wrong_description=f"epsilon / {WRONG}")
