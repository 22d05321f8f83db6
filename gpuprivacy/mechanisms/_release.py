"""The release record returned by every mechanism, and batched trials."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from gpuprivacy._checks import check_int, check_key, fail_closed, is_tracer
from gpuprivacy._typing import Array, Key


class Release(NamedTuple):
    """What a mechanism returns.

    Attributes:
      value: the differentially private output.
      info: a mechanism-specific NamedTuple. Fields that depend on the data
        but are *not* covered by the privacy guarantee are prefixed
        ``nonprivate_`` (useful for measuring utility in experiments; never
        publish them). Unprefixed fields are public parameters (noise scales)
        or functions of ``value`` alone.
      guarantee: what the mathematics proves for this release
        (:class:`~gpuprivacy.accounting.PureDP`, ``ApproxDP`` or ``ZCDP``),
        computed by the mechanism's ``*_guarantee`` function from the same
        validated parameters *before* any noise is drawn, so a release whose
        guarantee cannot be stated is refused, never returned. It is static
        PyTree metadata (not a leaf): it survives ``jax.jit``, ``jax.vmap``
        and :func:`run_trials` unchanged. It is ``None`` only when a privacy
        parameter is traced (``jax.jit(lambda e: mechanism(..., epsilon=e))``):
        the value is then unknown while tracing, so state it with the
        ``*_guarantee`` function for the concrete value (:func:`stated_guarantee`).
    """

    value: Array
    info: Any
    guarantee: Any = None


# The guarantee is the treedef's static part, so ``jax.jit``/``jax.vmap``/``jax.eval_shape`` carry it
# through (a frozen, hashable dataclass) while ``value`` and ``info`` stay the leaves.
jax.tree_util.register_pytree_node(
    Release,
    lambda release: ((release.value, release.info), release.guarantee),
    lambda guarantee, children: Release(children[0], children[1], guarantee))


def stated_guarantee(guarantee_fn: Callable[..., Any], **params: Any) -> Any:
    """``guarantee_fn(**params)``, the guarantee a mechanism attaches to its :class:`Release`.

    Every mechanism calls this with its own ``*_guarantee`` function and its validated
    parameters before it draws any noise (one source of truth: the function that
    documents the guarantee also states it on the release, and refuses parameters
    whose guarantee is not statable, such as delta >= 1). When a parameter is traced
    its value is unknown here, so the result is ``None`` and the release's traced
    checks (docs/fail_closed.md) withhold it if the value turns out invalid.
    """
    if any(is_tracer(leaf) for value in params.values() for leaf in jax.tree_util.tree_leaves(value)):
        return None
    return guarantee_fn(**params)


def guarantee_of(release_fn: Callable[..., Release], *args: Any, **kwargs: Any) -> Any:
    """The guarantee ``release_fn(*args, **kwargs)`` states, without drawing any noise.

    Traces the call abstractly (``jax.eval_shape``) and reads :attr:`Release.guarantee`, so
    the auditor registry, the CLI and the sweeps report exactly what the release carries.
    A mechanism that cannot be traced abstractly (host-routed) is called once instead.

    Raises:
      ValueError: if the release states no guarantee (a traced privacy parameter).
    """
    try:
        release = jax.eval_shape(lambda: release_fn(*args, **kwargs))
    except Exception:  # noqa: BLE001
        # Not traceable abstractly (host-routed work, a string in its info...): call it once. Invalid
        # parameters raise the same error from this call, before any noise; the value is discarded.
        release = release_fn(*args, **kwargs)
    guarantee = getattr(release, "guarantee", None)
    if guarantee is None:
        raise ValueError(f"{getattr(release_fn, '__name__', release_fn)!r} returned a release without a "
                         "guarantee (a privacy parameter was traced); pass concrete privacy parameters.")
    return guarantee


def withheld_unless(release: Release, ok: Any) -> Release:
    """``release``, or, where ``ok`` is False, its withheld form (fail closed, docs/fail_closed.md).

    ``ok`` comes from the traced checks of :mod:`gpuprivacy._checks` (``epsilon_ok``...); it is
    ``True`` for concrete, already validated parameters, and then the release is returned as is.
    Every leaf of the value becomes its data-independent withheld constant and ``info.valid`` is set.
    """
    if ok is True:
        return release
    value = jax.tree.map(lambda leaf: fail_closed(leaf, ok), release.value)
    info = release.info
    if "valid" in getattr(info, "_fields", ()):
        info = info._replace(valid=jax.numpy.asarray(ok))
    return Release(value, info, release.guarantee)


def run_trials(mechanism: Callable[..., Release], key: Key, num_trials: int, *args: Any,
               batched_args: bool = False, **kwargs: Any) -> Release:
    """Runs ``mechanism`` ``num_trials`` times with independent keys, batched by ``jax.vmap``.

    The key is split once, ``keys = jax.random.split(key, num_trials)``, and
    trial ``i`` runs ``mechanism(keys[i], *args_i, **kwargs)``. So this is
    exactly

    .. code-block:: python

        jax.vmap(functools.partial(mechanism, **kwargs),
                 in_axes=(0,) + (0 if batched_args else None,) * len(args))(keys, *args)

    and trial ``i`` gives the same release as the unbatched call with
    ``keys[i]``. A mechanism that cannot be vmapped (host-routed, such as
    :func:`~gpuprivacy.mechanisms.median.private_median`) may carry its own
    batched implementation, attached with :func:`batched_trials`; ``run_trials``
    then calls it with the same ``keys`` instead of ``jax.vmap``, with the same
    per-trial result.

    Args:
      mechanism: a mechanism ``(key, *data, **params) -> Release``.
      key: a single PRNG key, ``jax.random.key(seed)``.
      num_trials: number of independent runs (>= 1).
      *args: the data arguments. By default they are shared by every trial
        (broadcast). With ``batched_args=True`` every positional argument (every
        leaf of it) must have a leading axis of length ``num_trials``, and
        trial ``i`` sees ``arg[i]``.
      batched_args: whether the positional arguments carry a leading trials axis.
      **kwargs: privacy parameters and options, shared by every trial (they
        are bound with ``functools.partial``, so strings and bools are fine).

    Returns:
      A :class:`Release` whose leaves have a leading axis of length ``num_trials``.

    Raises:
      ValueError: if ``num_trials < 1`` or a batched argument has the wrong
        leading axis.

    Examples:
      >>> import jax
      >>> from gpuprivacy import mechanisms
      >>> out = mechanisms.run_trials(mechanisms.report_noisy_max, jax.random.key(0), 1000,
      ...                             [0.0, 1.0, 5.0], epsilon=1.0)
      >>> out.value.shape
      (1000,)
    """
    key = check_key(key)
    num_trials = check_int("num_trials", num_trials, minimum=1)
    if batched_args:
        for position, arg in enumerate(args):
            for leaf in jax.tree_util.tree_leaves(arg):
                shape = np.shape(leaf)
                if not shape or shape[0] != num_trials:
                    raise ValueError(
                        f"run_trials(batched_args=True) needs every positional argument to have a leading "
                        f"axis of length num_trials={num_trials}; argument {position} has shape {shape}. "
                        "Pass batched_args=False to share the arguments across trials.")
    keys = jax.random.split(key, num_trials)
    batched = getattr(mechanism, RUN_TRIALS_HOOK, None)
    if batched is not None:
        return batched(keys, *args, batched_args=batched_args, **kwargs)
    in_axes = (0,) + (0 if batched_args else None,) * len(args)
    return jax.vmap(functools.partial(mechanism, **kwargs), in_axes=in_axes)(keys, *args)


RUN_TRIALS_HOOK = "__gpuprivacy_run_trials__"


def batched_implementation(mechanism: Callable[..., Release]) -> Callable[..., Release] | None:
    """The batched implementation attached to ``mechanism`` with :func:`batched_trials`, or None.

    Batch engines (``run_trials``, the sweeps) call it as ``implementation(keys, *args,
    batched_args=..., **kwargs)`` instead of ``jax.vmap`` for mechanisms that cannot be vmapped.
    """
    return getattr(mechanism, RUN_TRIALS_HOOK, None)


def batched_trials(implementation: Callable[..., Release]) -> Callable[[Callable[..., Release]], Callable[..., Release]]:
    """Decorator: give a mechanism its own batched implementation for :func:`run_trials`.

    For mechanisms that cannot be ``jax.vmap``-ed efficiently (e.g. host-routed ones such as
    :func:`gpuprivacy.mechanisms.median.private_median`). ``run_trials`` then calls

    .. code-block:: python

        implementation(keys, *args, batched_args=batched_args, **kwargs)

    instead of ``jax.vmap``, with ``keys = jax.random.split(key, num_trials)`` (already split and
    validated, like every other argument ``run_trials`` checks). The implementation must return a
    :class:`Release` whose leaves have a leading axis of length ``num_trials`` and whose trial
    ``i`` equals ``mechanism(keys[i], *args_i, **kwargs)`` exactly: the hook changes how the
    trials are computed, never what they release.

    The implementation is stored as the attribute ``__gpuprivacy_run_trials__`` of the mechanism,
    which is returned unchanged.

    Examples:
      >>> from gpuprivacy.mechanisms._release import batched_trials
      >>> def _many(keys, data, *, batched_args, epsilon): ...
      >>> @batched_trials(_many)
      ... def mechanism(key, data, *, epsilon): ...
      >>> mechanism.__gpuprivacy_run_trials__ is _many
      True
    """
    def attach(mechanism: Callable[..., Release]) -> Callable[..., Release]:
        setattr(mechanism, RUN_TRIALS_HOOK, implementation)
        return mechanism

    return attach
