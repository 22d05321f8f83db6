"""One calling convention for every private median.

Every median is ``m(key, data, *, epsilon, lower, upper, clip=False, <own parameters>)``; rows
outside ``[lower, upper]`` are one shared ValueError unless ``clip=True`` (then clamped);
``m_guarantee(**params)`` takes exactly the mechanism's parameters and rejects misspellings;
``run_trials(m, key, T, data, **params)`` gives trial i == ``m(keys[i], data, **params)``.
"""

import inspect
import math
import re

import jax
import numpy as np
import pytest

from gpuprivacy import mechanisms
from gpuprivacy.mechanisms import instance_optimal as io
from gpuprivacy.mechanisms import median

LOWER, UPPER = -4.0, 4.0
N = 61
DATA = np.random.default_rng(0).uniform(-1.0, 1.0, N)

# (mechanism, guarantee, its own parameters beyond epsilon/lower/upper/clip)
MEDIANS = {
    "exponential_mechanism_median": (median.exponential_mechanism_median,
                                     median.exponential_mechanism_median_guarantee, {}),
    "private_median": (median.private_median, median.private_median_guarantee,
                       dict(min_density=0.5, radius=1.0, median_bound=4.0, constant=2.0)),
    "piecewise_laplace_median": (io.piecewise_laplace_median, io.piecewise_laplace_median_guarantee, {}),
    "inverse_sensitivity_median": (io.inverse_sensitivity_median, io.inverse_sensitivity_median_guarantee, {}),
    "smooth_sensitivity_median": (io.smooth_sensitivity_median, io.smooth_sensitivity_median_guarantee, {}),
    "laplace_median": (io.laplace_median, io.laplace_median_guarantee, {}),
}
NAMES = sorted(MEDIANS)


def params_of(name, **extra):
    return dict(epsilon=1.0, lower=LOWER, upper=UPPER, **MEDIANS[name][2], **extra)


@pytest.mark.parametrize("name", NAMES)
def test_signature_prefix(name):
    mechanism, guarantee, _ = MEDIANS[name]
    params = list(inspect.signature(mechanism).parameters.values())
    assert [p.name for p in params[:6]] == ["key", "data", "epsilon", "lower", "upper", "clip"]
    assert [p.kind for p in params[:2]] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 2
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[2:])
    assert params[5].default is False
    if name == "private_median":  # the model needs no bounded domain
        assert (params[3].default, params[4].default) == (-math.inf, math.inf)
    else:
        assert params[3].default is params[4].default is inspect.Parameter.empty
    # The guarantee takes exactly the mechanism's keyword parameters, with the same defaults.
    gparams = inspect.signature(guarantee).parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in gparams.values())
    assert {k: p.default for k, p in gparams.items()} == {p.name: p.default for p in params[2:]}


@pytest.mark.parametrize("name", NAMES)
def test_out_of_domain_rows_are_one_shared_error(name):
    mechanism = MEDIANS[name][0]
    x = DATA.copy()
    x[[5, 9]] = [7.5, -6.0]
    pattern = (r"data has 2 row\(s\) outside the declared domain \[lower, upper\] = \[-4\.0, 4\.0\]; "
               r"the first is 7\.5 at index 5\..*pass clip=True to clamp rows to \[lower, upper\]")
    with pytest.raises(ValueError, match=pattern):
        mechanism(jax.random.key(0), x, **params_of(name))
    # clip=True clamps: the release equals the one on the clamped data.
    key = jax.random.key(1)
    clipped = mechanism(key, x, **params_of(name, clip=True))
    reference = mechanism(key, np.clip(x, LOWER, UPPER), **params_of(name))
    assert float(clipped.value) == float(reference.value)
    with pytest.raises(TypeError, match="clip"):
        mechanism(key, DATA, **params_of(name, clip="yes"))


@pytest.mark.parametrize("name", NAMES)
def test_non_finite_rows_give_the_shared_message(name):
    x = DATA.copy()
    x[3] = np.nan
    with pytest.raises(ValueError, match=r"data contains 1 non-finite value\(s\) \(NaN or inf\), the first at index"):
        MEDIANS[name][0](jax.random.key(0), x, **params_of(name))


def test_private_median_domain_is_optional():
    params = MEDIANS["private_median"][2]
    key = jax.random.key(2)
    unbounded = median.private_median(key, DATA, epsilon=1.0, **params)
    assert float(unbounded.value) == float(median.private_median(key, DATA, **params_of("private_median")).value)
    with pytest.raises(ValueError, match="lower must be < upper"):
        median.private_median(key, DATA, epsilon=1.0, lower=1.0, upper=0.0, **params)


@pytest.mark.parametrize("name", NAMES)
def test_guarantee_takes_the_mechanisms_params(name):
    _, guarantee, _ = MEDIANS[name]
    params = params_of(name, clip=True)
    assert guarantee(**params).epsilon == 1.0
    with pytest.raises(TypeError):
        guarantee(**params, epsilonn=1.0)
    with pytest.raises(TypeError):
        guarantee(**{("lowr" if k == "lower" else k): v for k, v in params.items()})
    if name != "private_median":  # lower/upper are required where the mechanism requires them
        with pytest.raises(TypeError, match="lower"):
            guarantee(**{k: v for k, v in params.items() if k != "lower"})


@pytest.mark.parametrize("name", NAMES)
def test_run_trials_equals_the_unbatched_calls(name):
    mechanism = MEDIANS[name][0]
    key = jax.random.key(3)
    keys = jax.random.split(key, 3)
    params = params_of(name)
    out = mechanisms.run_trials(mechanism, key, 3, DATA, **params)
    assert np.shape(out.value) == (3,)
    for i in range(3):
        single = mechanism(keys[i], DATA, **params)
        assert float(out.value[i]) == float(single.value)
        for got, want in zip(jax.tree_util.tree_leaves(out.info), jax.tree_util.tree_leaves(single.info)):
            np.testing.assert_array_equal(np.asarray(got)[i], np.asarray(want))


def test_private_median_run_trials_hook_batched_and_legacy_driver():
    assert callable(getattr(median.private_median, "__gpuprivacy_run_trials__"))
    params = params_of("private_median")
    data = np.stack([DATA, DATA[::-1] * 2.0, np.linspace(-3.0, 3.0, N)])
    key = jax.random.key(4)
    keys = jax.random.split(key, 3)
    out = mechanisms.run_trials(median.private_median, key, 3, data, batched_args=True, **params)
    loop = [float(median.private_median(k, x, **params).value) for k, x in zip(keys, data)]
    np.testing.assert_array_equal(np.asarray(out.value), loop)
    legacy = median.private_median_trials(key, data, **params)
    assert isinstance(legacy, median.PrivateMedianTrials)
    np.testing.assert_array_equal(legacy.values, loop)
    with pytest.raises(TypeError):
        mechanisms.run_trials(median.private_median, key, 3, DATA, **params, radiuss=1.0)
    with pytest.raises(ValueError, match=re.escape("pass clip=True to clamp rows to [lower, upper]")):
        mechanisms.run_trials(median.private_median, key, 3, DATA * 10.0, **params)


def test_exponential_median_no_longer_clips_silently():
    x = np.r_[DATA, 100.0]
    with pytest.raises(ValueError, match="outside the declared domain"):
        median.exponential_mechanism_median(jax.random.key(0), x, epsilon=1.0, lower=LOWER, upper=UPPER)
    out = median.exponential_mechanism_median(jax.random.key(0), x, epsilon=1.0, lower=LOWER, upper=UPPER,
                                              clip=True)
    assert LOWER <= float(out.value) <= UPPER
