"""Exhaustive property tests of spec 000 §5.3 on a universe of 8 atoms: every subset x, every
neighbour x + {i}, random and adversarial f, computed with the library's sweeps."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import subsets
from gpuprivacy.mechanisms import wrappers

U = 8
SIZES = subsets.popcounts(U)
MASKS = np.arange(1 << U)


def _tables(seed):
    rng = np.random.default_rng(seed)
    yield "random", rng.uniform(0, 3, size=1 << U)
    yield "lipschitz", SIZES * 0.5 + rng.uniform(0, 0.5, size=1 << U) * (SIZES % 2)  # steps <= 1
    yield "needle", np.where(MASKS == 0b10110101, 3.0, 0.0)
    yield "size-times-big", SIZES * 2.5
    yield "one-atom", np.where(MASKS & 1, 3.0, 0.0)


def _neighbours():
    for x in range(1 << U):
        for i in range(U):
            if not (x >> i) & 1:
                yield x, x | (1 << i)


def _local(table, x):
    """f restricted to the subsets of x, indexed by x's own bitmasks."""
    positions = [i for i in range(U) if (x >> i) & 1]
    local = np.zeros(1 << len(positions), dtype=np.int64)
    for bit, position in enumerate(positions):
        local[(np.arange(local.size) >> bit) & 1 == 1] |= 1 << position
    return table[local], len(positions)


def _brute_lipschitz(table, lowest):
    """is f 1-Lipschitz on the edges (z, z+i) with |z| >= lowest inside u? (psi < lowest+...) reference."""
    bad_top = np.full(1 << U, -10**9)
    for w in range(1 << U):
        for i in range(U):
            if (w >> i) & 1 and SIZES[w] - 1 >= lowest and abs(table[w] - table[w ^ (1 << i)]) > 1:
                bad_top[w] = SIZES[w] - 1
    return bad_top


@pytest.mark.parametrize("seed", [0, 1])
def test_monotonization_is_monotone_and_fixes_monotone_f(seed):
    for name, table in _tables(seed):
        for low in (0, 3, 6):
            start = np.where(SIZES >= low, table, -np.inf)
            closure = np.asarray(subsets.subset_max(jnp.asarray(start), U))
            for x, y in _neighbours():
                assert closure[x] <= closure[y]  # Obs 3.5 (1)
        monotone = np.asarray(subsets.subset_max(jnp.asarray(table), U))
        again = np.asarray(subsets.subset_max(jnp.asarray(monotone), U))
        assert np.array_equal(again, monotone)  # Obs 3.5 (2)


def _shi_minima(g, x, lam, k):
    n = int(SIZES[x])
    out = []
    for d in range(lam + 1):
        level = [g[s] for s in range(1 << U) if s & x == s and SIZES[s] == n - d]
        out.append(min(level) if level else k)
    return out


def test_shifted_inverse_scores_move_by_at_most_one_for_monotone_g_and_more_otherwise():
    # Lemma 3.4: ell^g has sensitivity 1 for monotone g, so every ShI score moves by <= 1 (pure DP).
    rng = np.random.default_rng(3)
    k, lam = 6, 3
    raw = rng.integers(0, k, size=1 << U)
    g = np.asarray(subsets.subset_max(jnp.asarray(raw), U))  # monotone
    worst_monotone, worst_raw = 0, 0
    for x, y in _neighbours():
        sx = wrappers.shifted_inverse_scores(_shi_minima(g, x, lam, k), k)
        sy = wrappers.shifted_inverse_scores(_shi_minima(g, y, lam, k), k)
        worst_monotone = max(worst_monotone, int(np.abs(sx - sy).max()))
        rx = wrappers.shifted_inverse_scores(_shi_minima(raw, x, lam, k), k)
        ry = wrappers.shifted_inverse_scores(_shi_minima(raw, y, lam, k), k)
        worst_raw = max(worst_raw, int(np.abs(rx - ry).max()))
    assert worst_monotone == 1
    assert worst_raw > 1  # the counterexample: without monotonicity ShI is not private


@pytest.mark.parametrize("lowest", [0, 2, 4])
def test_stability_floor_matches_the_definition(lowest):
    for name, table in _tables(4):
        quantised = np.asarray(wrappers.sanitise_real(jnp.asarray(table), scale=1.0))
        psi = np.asarray(wrappers.stability_floor(jnp.asarray(quantised), U, lowest))
        reference = np.asarray(subsets.subset_max(jnp.asarray(_brute_lipschitz(quantised, lowest)), U))
        assert np.array_equal(np.maximum(psi, -10**9), np.maximum(reference, -10**9)), name


def test_largest_stable_size_and_stabilization_interleave():
    # Claim 4.4 and Lemma 4.2 items 1-2 for S_{l,h}[C[f]] with f-stability.
    for name, table in _tables(5):
        f = np.asarray(wrappers.sanitise_real(jnp.asarray(table), scale=1.0))
        for low in (1, 3):
            psi = np.asarray(wrappers.stability_floor(jnp.asarray(f), U, low))
            stable = (SIZES >= low) & (psi < low)
            m = np.asarray(subsets.subset_max(jnp.asarray(np.where(stable, SIZES, -1)), U))
            lifted = (f + SIZES) / 2  # C[f]
            S = {h: np.asarray(subsets.subset_max(jnp.asarray(np.where(stable & (SIZES >= max(h, low)), lifted,
                                                                       -np.inf)), U)) for h in range(low, U + 2)}
            for v, u in _neighbours():
                if SIZES[v] < low:
                    continue
                assert m[v] in (m[u], m[u] - 1), name  # Claim 4.4
                for h in range(low, U + 1):
                    assert S[h][u] >= S[h + 1][u]  # item 1
                    if np.isfinite(S[h + 1][u]):
                        assert S[h + 1][u] - 1 <= S[h][v] + 1e-12, (name, h)  # item 2
                    assert S[h][v] <= S[h][u]


@functools.cache
def _batched_proxy(n, tau):
    return jax.jit(jax.vmap(lambda v: wrappers.proxy_p(v, n, tau)))


def test_small_diameter_proxy_sensitivity_and_filter_lipschitz():
    r = 1.0
    # Lemma C.4: |2P(u) - 2P(v)| <= 2(4 + 3r/tau) <= 10 with tau = ceil(3r); Cor C.2 with tau = ceil(r): 14.
    for tau, bound in ((int(np.ceil(3 * r)), 10.0), (int(np.ceil(r)), 14.0)):
        for name, table in _tables(6):
            clamped = np.asarray(wrappers.sanitise_real(jnp.asarray(table), scale=1.0, lower=0.0, upper=r))
            proxy = {}
            for n in range(1, U + 1):  # batch every x of one size through the jitted proxy
                xs = [x for x in range(1, 1 << U) if SIZES[x] == n]
                stack = jnp.asarray(np.stack([_local(clamped, x)[0] for x in xs]))
                values = np.asarray(_batched_proxy(n, tau)(stack))
                proxy.update({x: 2 * float(value) - 1.5 * tau for x, value in zip(xs, values)})
            for x, y in _neighbours():
                if x:
                    assert abs(proxy[x] - proxy[y]) <= bound + 1e-9, (name, tau, x, y)
            if name == "lipschitz":
                # f (clamped) is Lipschitz everywhere: the proxy returns f exactly (Thm C.1, Cor C.2).
                for x in range(1, 1 << U):
                    assert proxy[x] == pytest.approx(clamped[x], abs=1e-9)


def test_cummings_durfee_extension_is_lipschitz_and_exact_on_lipschitz_f():
    for name, table in _tables(7):
        f = np.asarray(wrappers.sanitise_real(jnp.asarray(table), scale=1.0))
        extended = np.asarray(wrappers.lipschitz_extension(jnp.asarray(f), U))
        for x, y in _neighbours():
            assert abs(extended[x] - extended[y]) <= 1 + 1e-12, name
        if name in ("lipschitz",):
            assert np.array_equal(extended, f)


def test_double_monotonization_offsets_interleave_and_decrease():
    # Obs D.2 (monotone g), Lemma D.4 (g_{j+1}(y) <= g_j(x) <= g_j(y)), strict decrease of offsets.
    for name, table in _tables(8):
        f = np.asarray(wrappers.sanitise_real(jnp.asarray(table), scale=1.0, lower=0.0, upper=3.0))
        low = 3
        lifted = np.where(SIZES >= low, (f + SIZES - low) / 2, -np.inf)
        g = np.maximum(np.asarray(subsets.subset_max(jnp.asarray(lifted), U)), -low / 2)
        taus = 4

        def offsets(x):
            n = int(SIZES[x])
            h = [min((g[z] for z in range(1 << U) if z & x == z and SIZES[z] == n - d), default=np.inf)
                 for d in range(taus + 2)]
            return [min(h[d] + d for d in range(j + 1)) - j for j in range(taus + 2)]

        cache = {x: offsets(x) for x in range(1 << U)}
        for x, y in _neighbours():
            assert g[x] <= g[y]
            for j in range(taus + 1):
                assert cache[y][j + 1] <= cache[x][j] + 1e-12 and cache[x][j] <= cache[y][j] + 1e-12
        for x in range(1 << U):
            assert all(a - b >= 1 - 1e-12 for a, b in zip(cache[x], cache[x][1:]))


def test_subset_extension_proxy_sensitivity_lemma_4_6():
    # Lemma 4.6: for neighbours v subset u, |v| >= l and m_l(v) - tau > (|v| + l)/2:
    # |T(u) - T(v)| <= 1 + 2(|u| - l)/tau, with T = T' + |x|/2 computed by the library's proxy_t.
    kernel = functools.lru_cache(maxsize=None)(
        lambda n, low, tau: jax.jit(jax.vmap(lambda v: wrappers.proxy_t(v, n, low, tau))))
    checked = 0
    for name, table in _tables(9):
        f = np.asarray(wrappers.sanitise_real(jnp.asarray(table), scale=1.0))
        for low, tau in ((0, 1), (1, 2)):
            proxy = {}
            for n in range(1, U + 1):
                xs = [x for x in range(1, 1 << U) if SIZES[x] == n]
                stack = jnp.asarray(np.stack([_local(f, x)[0] for x in xs]))
                t_shifted, m = kernel(n, low, tau)(stack)
                for x, t, mm in zip(xs, np.asarray(t_shifted), np.asarray(m)):
                    proxy[x] = (float(t) + n / 2, int(mm))
            for v, u in _neighbours():
                if v == 0 or SIZES[v] < low:
                    continue
                (t_v, m_v), (t_u, _) = proxy[v], proxy[u]
                if m_v - tau > (SIZES[v] + low) / 2:
                    checked += 1
                    assert abs(t_u - t_v) <= 1 + 2 * (SIZES[u] - low) / tau + 1e-9, (name, low, tau, v, u)
    assert checked > 1000


def test_kl23_fact_on_stable_sets():
    # [KL23]: x, y l-stable with |x & y| >= l imply |f(x) - f(y)| <= 2 (max(|x|, |y|) - l) (spec 000 §2.5).
    inter = SIZES[MASKS[:, None] & MASKS[None, :]]  # popcount of the intersection
    checked = 0
    for name, table in _tables(10):
        f = np.asarray(wrappers.sanitise_real(jnp.asarray(table), scale=1.0))
        for low in (1, 3):
            psi = np.asarray(wrappers.stability_floor(jnp.asarray(f), U, low))
            stable = (SIZES >= low) & (psi < low)
            pairs = stable[:, None] & stable[None, :] & (inter >= low)
            bound = 2 * (np.maximum(SIZES[:, None], SIZES[None, :]) - low)
            gap = np.abs(f[:, None] - f[None, :])
            assert (gap[pairs] <= bound[pairs] + 1e-12).all(), name
            checked += int(pairs.sum())
    assert checked > 10_000
