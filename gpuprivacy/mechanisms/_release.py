"""The release record returned by every mechanism, and batched trials."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from gpuprivacy._checks import check_int, check_key
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
    """

    value: Array
    info: Any


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
    ``keys[i]``.

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
    in_axes = (0,) + (0 if batched_args else None,) * len(args)
    return jax.vmap(functools.partial(mechanism, **kwargs), in_axes=in_axes)(keys, *args)
