"""The trials of one sweep cell: data drawn on the device, the mechanism batched, chunked and sharded.

Trial ``i`` of a cell uses ``keys[i]`` with ``keys = jax.random.split(cell_key, num_trials)``;
it splits its key into a data key and a mechanism key, draws its dataset from the
data key (``fresh``) or uses the cell's one dataset (``fixed``), and calls the
public mechanism exactly as a curator would. So a trial's result depends on its
index and the cell only, never on the chunk size or the number of devices.

Compile once: the privacy and distribution parameters are traced arguments of one
jitted program per (mechanism, static parameters, data shape, chunk), kept in a
cache, so a grid over epsilon, sigma or a distribution's scale compiles once.
Parameters that the mechanism needs concrete (a calibration in mpmath, a string)
are static; which ones is found by tracing the mechanism once abstractly.

Scale: the trials of a chunk are split over the local devices with ``shard_map``
over a ``"trials"`` mesh axis, so each device draws and runs only its share; the
chunk is sized by a byte budget (:func:`gpuprivacy._memory.chunk_budget_bytes`).
"""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from gpuprivacy import _threefry as threefry
from gpuprivacy._lru import LRUCache
from gpuprivacy._memory import chunk_budget_bytes
from gpuprivacy._sort import sort
from gpuprivacy.mechanisms import batched_implementation, guarantee_of
from gpuprivacy.sweeps._mechanisms import PRIVACY_PARAMETERS, TARGETS, SweepableMechanism
from gpuprivacy.sweeps._one_trial import (_TRACEABLE, DataSpec, ROWS_OUTSIDE_DOMAIN, _draw_fn,  # noqa: F401
                                          _exact_values, _info_scalars, _mechanism_fn, _split, _valid,
                                          traceable_parameters)
from gpuprivacy.sweeps._program_cache import (_PROGRAMS, COMPILE_COUNT, COMPILE_SECONDS, LOAD_COUNT,  # noqa: F401
                                              MAX_PROGRAMS, _compiled)

TRIALS_AXIS = "trials"
# Bytes one trial touches per data value: the draw, a sorted copy, the mechanism's temporaries.
_BYTES_PER_VALUE = 64
_MIN_CHUNK = 8
# (mechanism, parameters, data shape) -> the guarantee its release states (see _guarantee); small entries.
_GUARANTEES = LRUCache(4096)

# The platforms on which the cells of an epsilon grid run as one program batched over the cells (what depends on
# the data alone computed once per trial for the whole group). On a CPU each cell calls a program of its own
# shape, which every cell of the grid shares (the parameters traced, not batched): on the development VM's five-
# median study (2 cores, 2026-11-29) the batched programs took 34.8 s to compile against 28.8 s, and ran no faster
# (37.8 s against 38.5 s); a CPU has no idle lanes for a wider batch to fill. Tests set it to force either way.
CELL_BATCHING_PLATFORMS: tuple[str, ...] = ("gpu", "cuda", "rocm", "tpu")


class CellTrials(NamedTuple):
    """Per-trial results of one cell, on the host.

    Attributes:
      values: the released values, ``[T, ...]``.
      targets: the non-private statistic of each trial's data, ``[T, ...]``.
      valid: whether each trial released (False: withheld, fail closed).
      guarantee: the releases' guarantee, read off the release.
      population: the population value of the target, or None.
      wall_s: seconds spent running the trials (compilation excluded).
      compile_s: seconds spent compiling programs for this cell (0 when cached).
      chunk: trials per chunk; devices: local devices the chunks were split over.
      info: the release's per-trial scalar diagnostics, ``{field: [T]}`` (the numeric fields
        of ``release.info`` that hold one number per trial, e.g. a route or a calibration).
      exact: the mechanism's exact per-dataset quantities, ``{name: [T]}`` (empty unless the
        sweepable mechanism states an ``exact`` function).
    """

    values: np.ndarray
    targets: np.ndarray
    valid: np.ndarray
    guarantee: Any
    population: float | None
    wall_s: float
    compile_s: float
    chunk: int
    devices: int
    info: dict = {}
    exact: dict = {}


def local_mesh() -> Mesh:
    """A one-axis mesh named ``"trials"`` over this process's devices."""
    return Mesh(np.array(jax.local_devices()), (TRIALS_AXIS,))


def plan_chunk(n: int, num_trials: int, num_devices: int, platform: str, chunk: int | None = None) -> int:
    """Trials per chunk: a power of two, a multiple of the devices, within the byte budget per device."""
    if chunk is not None:
        if chunk % num_devices:
            raise ValueError(f"chunk={chunk} must be a multiple of the {num_devices} local devices.")
        return int(chunk)
    per_trial = max(1, n) * _BYTES_PER_VALUE
    per_device = max(_MIN_CHUNK, 1 << max(0, (chunk_budget_bytes(platform) // per_trial).bit_length() - 1))
    wanted = max(1, -(-num_trials // num_devices))  # no larger than the cell needs
    per_device = min(per_device, max(_MIN_CHUNK, 1 << (wanted - 1).bit_length()))
    return per_device * num_devices


def _target_static(params: dict, exact: bool) -> tuple:
    """The parameters a target program depends on: all but the privacy ones (all with exact errors, which
    depend on the noise scale). A target statistic never reads a privacy parameter (one that did would fail
    loudly, with a KeyError), so the target program of an epsilon grid is one program, not one per epsilon."""
    return tuple(sorted((k, v) for k, v in params.items() if exact or k not in PRIVACY_PARAMETERS))


def release_guarantee(mechanism: SweepableMechanism, params: dict, example) -> Any:
    """``guarantee_of`` the release on data shaped like ``example``, remembered: a guarantee is stated before any
    noise from the parameters and the data's shape alone (never its values), and tracing a release abstractly
    for every cell of a grid costs more than the cells' trials at small n (a host-routed release, which
    cannot be traced abstractly, is even run once). The sweep's checks before the first cell fill it."""
    key = (mechanism.name, id(mechanism.release), json.dumps(params, sort_keys=True, default=repr),
           tuple(example.shape), str(example.dtype))
    if key not in _GUARANTEES:
        _GUARANTEES[key] = guarantee_of(mechanism.release, jax.random.key(0), example, **params)
    return _GUARANTEES[key]


@jax.jit
def _split_trial_keys(trial_keys):
    """``(data keys, mechanism keys)``: the two halves of ``jax.random.split`` of each trial key.

    One small program per number of trials, shared by every cell and mechanism. Split inside each cell's
    program instead, the keys cost every mechanism program about 0.07 s more to compile on a CPU (a Laplace
    release over 64 trials: 0.10 s with its keys given, 0.17-0.19 s splitting them, 2026-11-30).
    """
    halves = jax.vmap(threefry.split)(trial_keys)
    return halves[:, 0], halves[:, 1]


def _draw_key(data: DataSpec, chunk: int, mesh: Mesh, with_sorted: bool) -> tuple:
    return ("draw", data.name, id(data.distribution), data.n, data.fresh, chunk, with_sorted, _devices(mesh))


def _mechanism_key(mechanism, static, varying, shared, n, chunk, group, mesh, with_exact) -> tuple:
    return ("mechanism", mechanism.name, id(mechanism.release), id(mechanism.exact) if with_exact else None,
            static, tuple(sorted(varying)), tuple(sorted(shared)), n, chunk, group, _devices(mesh))


def _target_key(mechanism, static, n, chunk, mesh, with_exact) -> tuple:
    return ("target", mechanism.target, id(mechanism.exact) if with_exact else None, static, n, chunk,
            _devices(mesh))


def _draw_program(data: DataSpec, chunk: int, mesh: Mesh, example_args, with_sorted: bool):
    """Draws a chunk of trials' datasets, ``[chunk, n]``, each device its own rows. Shared by every mechanism.

    Returns ``(x, sorted x)`` with ``with_sorted`` (for the order-invariant mechanisms of the block: one sort
    for all of them, and their own sorts of sorted rows cost a linear check), else ``(x,)``.
    """
    cache_key = _draw_key(data, chunk, mesh, with_sorted)

    def build():
        draw = _draw_fn(data)

        def per_device(keys, dist_params, fixed):
            x = jax.vmap(draw, in_axes=(0, None, None))(keys, dist_params, fixed)
            return (x, sort(x, axis=-1)) if with_sorted else (x,)
        out_specs = (_SHARDED, _SHARDED) if with_sorted else (_SHARDED,)
        return jax.shard_map(per_device, mesh=mesh, in_specs=(_SHARDED, _REPLICATED, _REPLICATED),
                             out_specs=out_specs, check_vma=False)
    return _compiled(cache_key, build, example_args)


def _mechanism_program(mechanism, static, varying, shared, n: int, chunk: int, group: int, mesh: Mesh,
                       example_args, with_exact: bool):
    """Runs a chunk of trials for ``group`` cells that differ only in their traced parameters, on the chunk's
    shared datasets, each device its own rows. The traced parameters that differ between the cells
    (``varying``, stacked) are batched over the group; those equal in every cell (``shared``: the domain of an
    epsilon grid, say) are traced but not batched. So work that depends on the data and the shared parameters
    alone (a clip to the domain, a sort, the bounds, the target) runs once per trial for the whole group."""
    cache_key = _mechanism_key(mechanism, static, varying, shared, n, chunk, group, mesh, with_exact)

    def build():
        one = _mechanism_fn(mechanism, static, with_exact)
        trials = jax.vmap(one, in_axes=(0, 0, None))

        def per_device(keys, x, varying_params, shared_params):
            if group == 1:
                # One cell (every cell on a CPU, see CELL_BATCHING_PLATFORMS): its trials with a leading axis of
                # one added, not a vmap over one cell. XLA:CPU compiled the vmap of size one in about twice the
                # time (the piecewise-Laplace median at n = 101, chunk 8: 1.41 s against 0.67 s, 2026-11-30).
                out = trials(keys[0], x, {**{k: v[0] for k, v in varying_params.items()}, **shared_params})
                return jax.tree_util.tree_map(lambda leaf: leaf[None], out)
            return jax.vmap(lambda cell_keys, cell_params: trials(cell_keys, x, {**cell_params, **shared_params}))(
                keys, varying_params)
        return jax.shard_map(per_device, mesh=mesh, in_specs=(_GROUP_SHARDED, _SHARDED, _REPLICATED, _REPLICATED),
                             out_specs=_GROUP_SHARDED, check_vma=False)
    return _compiled(cache_key, build, example_args)


def _target_program(mechanism, static, n: int, chunk: int, mesh: Mesh, example_args, with_exact: bool):
    """The target statistic of a chunk of datasets (for mechanisms with their own batched path)."""
    cache_key = _target_key(mechanism, static, n, chunk, mesh, with_exact)
    target, static_params = TARGETS[mechanism.target], dict(static)

    def build():
        def per_device(x):
            return jax.vmap(lambda row: (target.statistic(row, static_params),
                                         _exact_values(mechanism, row, static_params) if with_exact else {}))(x)
        return jax.shard_map(per_device, mesh=mesh, in_specs=(_SHARDED,), out_specs=_SHARDED, check_vma=False)
    return _compiled(cache_key, build, example_args)


def _batches_cells(mesh: Mesh) -> bool:
    return mesh.devices.flat[0].platform in CELL_BATCHING_PLATFORMS


def _devices(mesh: Mesh) -> tuple:
    return tuple(d.id for d in mesh.devices.flat)


_SHARDED, _REPLICATED = PartitionSpec(TRIALS_AXIS), PartitionSpec()
_GROUP_SHARDED = PartitionSpec(None, TRIALS_AXIS)  # [cells of a group, trials, ...]: trials split


class CellRequest(NamedTuple):
    """One cell for :func:`run_cells`: a mechanism, its parameters and the cell's key (its mechanism noise)."""

    mechanism: SweepableMechanism
    params: dict
    cell_key: jax.Array


def run_cell(mechanism: SweepableMechanism, params: dict, data: DataSpec, cell_key: jax.Array, num_trials: int,
             *, data_key: jax.Array | None = None, mesh: Mesh | None = None, chunk: int | None = None,
             progress=None, exact: bool = False) -> CellTrials:
    """Runs ``num_trials`` trials of ``mechanism`` on ``data`` (see the module docstring).

    Trial ``i`` draws its mechanism noise from ``split(split(cell_key, T)[i])[1]`` and its data from
    ``split(split(cell_key, T)[i])[0]``, or, given a ``data_key``, from ``fold_in(data_key, i)`` (then
    every cell given the same data key sees the same datasets: common random numbers).
    """
    return run_cells([CellRequest(mechanism, params, cell_key)], data, num_trials, data_key=data_key, mesh=mesh,
                     chunk=chunk, progress=progress, exact=exact)[0]


def group_cells(requests, data: DataSpec, example, *, batch_cells: bool = True
                ) -> tuple[dict[tuple, list[int]], list[tuple]]:
    """How :func:`run_cells` runs each request: ``(groups, plans)``.

    ``plans[i] = (mode, hook, static, traced, guarantee)`` for request i: ``mode`` is ``"program"`` (one
    compiled program), ``"hook"`` (the mechanism's own batched driver) or ``"eager"`` (one call per trial).
    ``groups`` maps a group to its requests' indices: with ``batch_cells``, the requests of one mechanism that
    differ only in traced parameters (an epsilon grid) share one program, batched over them; without, each
    request is a group of its own (their programs are still one compiled program: the same key).
    """
    groups: dict[tuple, list[int]] = {}
    plans = []
    for index, req in enumerate(requests):
        hook = batched_implementation(req.mechanism.release)
        mode = ("program" if req.mechanism.batched and hook is None
                else ("hook" if req.mechanism.batched else "eager"))
        traceable = traceable_parameters(req.mechanism, req.params, data, example) if mode == "program" else ()
        static, traced = _split(req.params, traceable)
        guarantee = None
        if mode == "program":
            guarantee = release_guarantee(req.mechanism, req.params, example)
            group = ("program", req.mechanism.name, id(req.mechanism.release), id(req.mechanism.exact), static,
                     tuple(sorted(traced)), None if batch_cells else index)
        else:
            group = (mode, index)
        groups.setdefault(group, []).append(index)
        plans.append((mode, hook, static, traced, guarantee))
    return groups, plans


def _group_parameters(plans, members) -> tuple[dict, dict]:
    """A group's traced parameters: ``(varying, shared)``; those equal in every cell are passed once, not batched."""
    traced = plans[members[0]][3]
    values = {k: [plans[m][3][k] for m in members] for k in traced}
    same = {k for k, v in values.items() if all(bool(jnp.array_equal(v[0], w)) for w in v[1:])}
    return ({k: jnp.stack(v) for k, v in values.items() if k not in same},
            {k: v[0] for k, v in values.items() if k in same})


def program_keys(requests, data: DataSpec, num_trials: int, *, mesh: Mesh | None = None, chunk: int | None = None,
                 exact: bool = False) -> list[tuple]:
    """The keys of the programs :func:`run_cells` would compile for these cells, without compiling them.

    For a dry run (``gpuprivacy sweep --plan``): the same grouping, chunk and keys as :func:`run_cells`, so
    keys equal across blocks (the same mechanism program at the same n) are one program.
    """
    requests = list(requests)
    mesh = local_mesh() if mesh is None else mesh
    example = jnp.zeros((data.n,), jnp.float64)
    groups, plans = group_cells(requests, data, example, batch_cells=_batches_cells(mesh))
    widest = max(len(members) for members in groups.values())
    chunk = plan_chunk(data.n * widest, num_trials, mesh.shape[TRIALS_AXIS], mesh.devices.flat[0].platform, chunk)
    with_sorted = any(req.mechanism.order_invariant for req in requests)
    keys = [_draw_key(data, chunk, mesh, with_sorted)]
    for members in groups.values():
        mode, _, static, _, _ = plans[members[0]]
        mechanism = requests[members[0]].mechanism
        if mode == "program":
            varying, shared = _group_parameters(plans, members)
            keys.append(_mechanism_key(mechanism, static, varying, shared, data.n, chunk, len(members), mesh, exact))
        else:
            keys.append(_target_key(mechanism, _target_static(requests[members[0]].params, exact), data.n, chunk,
                                    mesh, exact))
    return keys


def run_cells(requests, data: DataSpec, num_trials: int, *, data_key: jax.Array | None = None,
              mesh: Mesh | None = None, chunk: int | None = None, progress=None,
              exact: bool = False) -> list[CellTrials]:
    """Runs several cells on the same datasets: each chunk of data is drawn once and fed to every cell.

    Cells of one mechanism that differ only in traced parameters (an epsilon grid) share one compiled program.
    On an accelerator it is batched over the cells, so what depends on the data alone is computed once per trial
    for all of them; on a CPU each cell calls it (``CELL_BATCHING_PLATFORMS``: it compiles faster there).
    A cell's results equal :func:`run_cell` with the same keys, whatever the other cells (tested).

    Three ways to run a cell's chunk, all giving trial ``i`` the same keys and data: one compiled program
    (the mechanism traced under ``vmap``), the mechanism's own batched driver (its ``run_trials`` hook,
    e.g. host-routed trials), or, for a mechanism marked ``batched=False``, one call per trial on data
    drawn batched on the device.

    Args:
      requests: :class:`CellRequest` s.
      data: where the datasets come from (shared by every request).
      num_trials: trials per cell.
      data_key: the datasets' key (trial i: ``fold_in(data_key, i)``); None only for one request, whose
        trial keys then also give its data (as :func:`run_cell` without a data key).
      exact: also evaluate the mechanisms' exact error quantities (their ``exact`` functions) on every
        trial's data. They can cost more than the release itself (a bisection on an exact CDF):
        sweeps ask for them with ``exact = true`` in the config.
    """
    requests = list(requests)
    if data_key is None and len(requests) != 1:
        raise ValueError("run_cells needs a data_key for several cells (they share the datasets).")
    mesh = local_mesh() if mesh is None else mesh
    num_devices = mesh.shape[TRIALS_AXIS]
    platform = mesh.devices.flat[0].platform
    fixed = _fixed_data(data, requests[0].cell_key if data_key is None else data_key)
    example = fixed if fixed is not None else jnp.zeros((data.n,), jnp.float64)

    groups, plans = group_cells(requests, data, example, batch_cells=_batches_cells(mesh))
    widest = max(len(members) for members in groups.values())
    chunk = plan_chunk(data.n * widest, num_trials, num_devices, platform, chunk)
    padded = -(-num_trials // chunk) * chunk

    def trial_keys(cell_key):
        keys = jax.random.split(cell_key, num_trials)
        if padded != num_trials:  # repeat the first keys to fill the last chunk; those trials are dropped
            keys = jnp.concatenate([keys, jnp.resize(keys, (padded - num_trials,))])
        return keys

    halves = [_split_trial_keys(trial_keys(req.cell_key)) for req in requests]
    keys = [mechanism_keys for _, mechanism_keys in halves]  # what every mode hands the mechanism
    if data_key is None:
        data_keys = halves[0][0]
    else:
        data_keys = jax.vmap(lambda i: jax.random.fold_in(data_key, i))(jnp.arange(padded, dtype=jnp.uint32))
    dist_params = {k: jnp.asarray(v, jnp.float64) for k, v in data.params.items()}
    fixed_arg = fixed if fixed is not None else jnp.zeros((data.n,), jnp.float64)
    with_sorted = any(req.mechanism.order_invariant for req in requests)
    draw, draw_compile = _draw_program(data, chunk, mesh, (data_keys[:chunk], dist_params, fixed_arg), with_sorted)
    x_example = jax.ShapeDtypeStruct((chunk, data.n), jnp.float64)
    compile_s = [draw_compile / len(requests)] * len(requests)
    programs = {}
    sharing: dict[int, tuple[float, list[int]]] = {}  # a compiled program -> (its compile seconds, its cells)
    for group, members in groups.items():
        mode, hook, static, traced, _ = plans[members[0]]
        req = requests[members[0]]
        if mode == "program":
            params = _group_parameters(plans, members)
            key_example = jax.ShapeDtypeStruct((len(members), chunk) + keys[0].shape[1:], keys[0].dtype)
            run, seconds = _mechanism_program(req.mechanism, static, *params, data.n, chunk, len(members), mesh,
                                              (key_example, x_example, *params), exact)
            programs[group] = (run, params, jnp.stack([keys[m] for m in members]))
        else:
            run, seconds = _target_program(req.mechanism, _target_static(req.params, exact), data.n, chunk, mesh,
                                           (x_example,), exact)
            programs[group] = (run, None, None)
        spent, cells = sharing.get(id(run), (0.0, []))
        sharing[id(run)] = (spent + seconds, cells + list(members))
    for spent, cells in sharing.values():  # the cells that share a program share its compile time evenly
        for m in cells:
            compile_s[m] += spent / len(cells)

    parts: list[list] = [[] for _ in requests]
    wall = [0.0] * len(requests)
    guarantees = [plan[4] for plan in plans]
    for start in range(0, padded, chunk):
        t0 = time.perf_counter()
        drawn = draw(data_keys[start:start + chunk], dist_params, fixed_arg)
        draw_s = time.perf_counter() - t0
        for group, members in groups.items():
            t0 = time.perf_counter()
            mode, hook, _, _, _ = plans[members[0]]
            run, params, group_keys = programs[group]
            x = drawn[-1] if requests[members[0]].mechanism.order_invariant else drawn[0]
            if mode == "program":
                out = jax.tree_util.tree_map(np.asarray, run(group_keys[:, start:start + chunk], x, *params))
                for j, m in enumerate(members):
                    parts[m].append(jax.tree_util.tree_map(lambda leaf, j=j: leaf[j], out))
            else:
                (m,) = members
                req, chunk_keys = requests[m], keys[m][start:start + chunk]
                target, exact = run(x)
                if mode == "hook":
                    # One call of the mechanism's own driver per chunk. (Several chunks per call were measured
                    # slower for the host-routed private median, 2026-11-29: 30.6 s against 23.6 s on the
                    # five-median study's normal-law cells.)
                    release, out = _hook_release(hook, req.params, [(x, chunk_keys, target, exact)])
                    guarantees[m] = release.guarantee if guarantees[m] is None else guarantees[m]
                    parts[m].append(out)
                else:
                    release, ok, info = _eager_trials(req.mechanism, chunk_keys, x, req.params)
                    guarantees[m] = release.guarantee if guarantees[m] is None else guarantees[m]
                    parts[m].append(jax.tree_util.tree_map(np.asarray, (release.value, target, ok, info, exact)))
            seconds = time.perf_counter() - t0
            for m in members:
                wall[m] += seconds / len(members) + draw_s / len(requests)
                if progress is not None:
                    progress.update(min(chunk, num_trials - start))
    results = []
    for m, req in enumerate(requests):
        population = None
        if data.distribution is not None:
            population = TARGETS[req.mechanism.target].population(data.distribution, data.params, req.params)
        value, target, ok, info, exact = jax.tree_util.tree_map(
            lambda *leaves: np.concatenate(leaves)[:num_trials], *parts[m])
        results.append(CellTrials(value, target, ok.astype(bool), guarantees[m], population, wall[m], compile_s[m],
                                  chunk, num_devices, info, exact))
    return results


def _hook_release(hook, params: dict, pieces: list) -> tuple:
    """One call of a mechanism's own batched driver on the trials of ``pieces`` (chunks of ``(x, mechanism keys,
    target, exact)``): its release and the chunks' ``(value, target, valid, info, exact)`` on the host."""
    x = jnp.concatenate([piece[0] for piece in pieces])
    mechanism_keys = jnp.concatenate([piece[1] for piece in pieces])
    release = hook(mechanism_keys, x, batched_args=True, **params)
    info = _info_scalars(release.info, (x.shape[0],))
    ok = getattr(release.info, "valid", None)
    ok = np.isfinite(np.asarray(release.value, np.float64)) if ok is None else ok
    target, exact = jax.tree_util.tree_map(lambda *leaves: np.concatenate([np.asarray(v) for v in leaves]),
                                           *[(piece[2], piece[3]) for piece in pieces])
    return release, jax.tree_util.tree_map(np.asarray, (release.value, target, ok, info, exact))


def _eager_trials(mechanism: SweepableMechanism, keys, x, params):
    """One call per trial (a mechanism that cannot be traced) with its mechanism key; returns the stacked releases."""
    releases = []
    for mechanism_key, row in zip(keys, x):
        releases.append(mechanism.release(mechanism_key, row, **params))
    value = np.stack([np.asarray(r.value) for r in releases])
    ok = np.array([bool(_valid(r)) for r in releases])
    infos = [_info_scalars(r.info) for r in releases]
    common = set.intersection(*(set(i) for i in infos)) if infos else set()
    info = {name: np.stack([np.asarray(i[name]) for i in infos]) for name in sorted(common)}
    return _Stacked(value, releases[0].guarantee), ok, info


class _Stacked(NamedTuple):
    value: Any
    guarantee: Any


def _fixed_data(data: DataSpec, cell_key):
    if data.distribution is None:
        return jnp.asarray(data.fixed, jnp.float64)
    if data.fresh:
        return None
    # One dataset for the whole cell, from the cell's own data key (independent of the trials' keys).
    fixed_key = jax.random.fold_in(cell_key, 0x5EED)
    params = {k: jnp.asarray(v, jnp.float64) for k, v in data.params.items()}
    cache_key = ("fixed-draw", id(data.distribution), data.n)
    if cache_key not in _PROGRAMS:
        distribution, n = data.distribution, data.n
        _PROGRAMS[cache_key] = jax.jit(lambda key, params: distribution.draw(key, (n,), **params))
    return _PROGRAMS[cache_key](fixed_key, params)
