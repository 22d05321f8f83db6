"""Every auditor entry claims exactly the guarantee its release carries (``Release.guarantee``).

The registry reads each claim off the public release it audits
(``mechanisms.guarantee_of``); it never recomputes it from a ``*_guarantee``
function, so the auditor checks what the mechanism states about itself.
"""

import json
import subprocess
import sys

import jax
import pytest

from gpuprivacy import audit


@pytest.mark.parametrize("name", audit.registered())
def test_every_entry_claims_the_guarantee_its_release_carries(name):
    entry = audit.get(name)
    if entry.positive_control:
        pytest.skip("a positive control claims what its (broken) authors claimed, not what a release states")
    (x, _), *_ = entry.worst_case_pairs
    release = entry.sample.release(jax.random.key(3), x)  # a real release, noise drawn
    assert release.guarantee is not None, f"{name}: the release it audits carries no guarantee"
    assert entry.claim == release.guarantee, (name, entry.claim, release.guarantee)


# Run in a fresh process so that no entry is already cached: every public ``*_guarantee`` function is
# replaced by one that raises, then every entry is built. The mechanisms call their own (private) copies
# of those functions, so releases still carry their guarantees; only a registry that recomputed a claim
# would fail here.
_BUILD_WITHOUT_GUARANTEE_FUNCTIONS = r"""
import inspect, json, sys
import jax
from gpuprivacy import audit, mechanisms

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


def refuse(name):
    def guarantee(*args, **kwargs):
        raise AssertionError(f"the auditor registry called {name}; read the claim off the release instead")
    return guarantee


# The public faces only: the flat namespace and the family namespaces (blackbox, median, ...).
namespaces = [mechanisms] + [value for name, value in inspect.getmembers(mechanisms, inspect.ismodule)
                             if not name.startswith("_") and value.__name__.startswith("gpuprivacy.mechanisms.")]
assert {namespace.__name__ for namespace in namespaces} >= {"gpuprivacy.mechanisms.wrappers",
                                                           "gpuprivacy.mechanisms.blackbox"}
for namespace in namespaces:
    for name in dir(namespace):
        if name.endswith("_guarantee") and callable(getattr(namespace, name)):
            setattr(namespace, name, refuse(f"{namespace.__name__}.{name}"))


def claim(name):
    try:
        return repr(audit.get(name).claim)
    except Exception as error:  # reported by name, next to the other entries' claims
        return f"{type(error).__name__}: {error}"[:500]


json.dump({name: claim(name) for name in audit.registered()}, sys.stdout)
"""


def test_the_registry_builds_every_claim_without_calling_a_guarantee_function():
    proc = subprocess.run([sys.executable, "-c", _BUILD_WITHOUT_GUARANTEE_FUNCTIONS], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    claims = json.loads(proc.stdout)
    refused = {name: claim for name, claim in claims.items() if "called gpuprivacy.mechanisms" in claim}
    assert not refused, refused
    assert claims == {name: repr(audit.get(name).claim) for name in audit.registered()}
