"""The public mechanisms API is documented (tests/test_doctests.py runs the examples)."""

from gpuprivacy import mechanisms

PUBLIC = sorted(name for name in dir(mechanisms) if not name.startswith("_"))
WITH_EXAMPLES = [name for name in PUBLIC if ">>>" in (getattr(getattr(mechanisms, name), "__doc__", "") or "")]


def test_every_mechanism_has_examples_and_a_guarantee():
    for name in ["laplace_mechanism", "gaussian_mechanism", "gaussian_mechanism_zcdp", "exponential_mechanism",
                 "report_noisy_max", "permute_and_flip", "above_threshold", "sparse_vector"]:
        assert name in WITH_EXAMPLES
        assert f"{name}_guarantee" in PUBLIC
        assert "References:" in getattr(mechanisms, name).__doc__
        assert ".. math::" in getattr(mechanisms, name).__doc__
