"""Benchmark: the privacy auditor's sampling path vs a naive NumPy loop, and vs its own sampler.

Four measurements, all in one run:

(a) Gaussian report-noisy-max over ``d = 100`` candidates,
    ``argmax(scores + sigma * normal)``, as a jitted ``jax.vmap`` over split
    keys (the library's Gaussian RNM lands later, so the sampler is defined
    here from the public ``gpuprivacy.noise.gaussian``);
(b) Laplace AboveThreshold through the registered auditor entry
    ``gpuprivacy.audit.get("above-threshold", num_queries=...).sample``;
(c) end-to-end ``gpuprivacy.audit.audit`` of ``report-noisy-max-gumbel`` on
    its worst-case pair, 10^6 samples per side (10^7 with ``--gpu``);
(d) end-to-end ``audit()`` vs the mechanism's batched sampler alone, for
    ``report-noisy-max-gumbel`` (discrete outputs) and ``laplace`` (real
    outputs) on their worst-case pairs, 10^6 samples per side (10^5 with
    ``--quick``, 10^7 with ``--gpu``). The baseline is ``entry.sample(key, x, n)``
    on both datasets, one call each, blocked until ready; a second baseline
    draws the same number of samples the way the auditor does (blocks of up to
    ``audit.SAMPLES_PER_CALL`` with keys ``fold_in(key, block)``), so the gap
    between the two is what block-wise drawing itself costs or saves. Target
    (issue): audit within 1.3x of the sampler alone, measured in the same run.
    All three are steady state (a warm-up call of each compiles first), best of
    ``--repeats`` with the three interleaved, so load changes hit them alike.

For (a) and (b) "ours" draws the samples in chunks the way the auditor did
before its engine (one device call per chunk with key ``fold_in(key, chunk)``,
outputs copied to host memory), steady state, best of ``--repeats``; the
compiling first call is reported separately. The baseline is a plain Python
loop that draws one sample per iteration with ``numpy.random.Generator``
(vectorised within a sample), the way a naive auditor would. It is timed in the
same run on at most ``--loop-samples`` samples and scaled linearly to
``--samples``; the output says when it was scaled. Both sides' output
histograms are compared (total variation distance) as a sanity check that they
sample the same law.

    python experiments/bench_audit.py                  # CPU-sized (a few minutes on 2 cores)
    python experiments/bench_audit.py --quick          # smallest sizes (a smoke run)
    python experiments/bench_audit.py --cases audit    # only (c) and (d)
    python experiments/bench_audit.py --gpu            # 10^7 samples, bigger chunks
    python experiments/bench_audit.py --json           # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import gpuprivacy
from gpuprivacy import audit, mechanisms, noise
from _timing import mode_sizes  # experiments/_timing.py (the script's folder is on sys.path)

NUM_CANDIDATES = 100
SIGMA = 2.0
ABOVE_THRESHOLD_EPSILON = 1.0  # the registry default of "above-threshold"
SEED = 0
AUDIT_TARGET_RATIO = 1.3  # the target: audit() within 1.3x of the sampler alone
# Sizes per mode (explicit flags win): samplers (a, b), audit samples per side (c, d), sampler chunk.
MODES = {
    "default": dict(samples=10**6, audit_samples=10**6, chunk_size=10**5),
    "quick": dict(samples=10**5, audit_samples=10**5, chunk_size=10**5),
    "gpu": dict(samples=10**7, audit_samples=10**7, chunk_size=10**6),
}


# --------------------------------------------------------------------------- samplers (ours)

@functools.partial(jax.jit, static_argnums=3)
def _gaussian_rnm_batch(key, scores, sigma, num_samples):
    def one(k):
        return jnp.argmax(scores + sigma * noise.gaussian(k, scores.shape)).astype(jnp.int32)

    return jax.vmap(one)(jax.random.split(key, num_samples))


def gaussian_rnm_sample(key, scores, num_samples, *, sigma=SIGMA):
    """``sample(key, scores, n) -> int32[n]``: Gaussian report-noisy-max, the auditor's sampler shape."""
    return _gaussian_rnm_batch(key, jnp.asarray(scores, jnp.float64), jnp.float64(sigma), int(num_samples))


def draw_chunked(sample, key, data, num_samples, chunk_size):
    """All outputs of ``sample`` drawn as the auditor draws them: keys fold_in(key, chunk), copied to host."""
    chunks, done, chunk = [], 0, 0
    while done < num_samples:
        size = min(chunk_size, num_samples - done)
        chunks.append(np.asarray(sample(jax.random.fold_in(key, chunk), data, size)))
        done += size
        chunk += 1
    return np.concatenate(chunks)


# --------------------------------------------------------------------------- baselines (naive NumPy loops)

def numpy_gaussian_rnm_loop(rng, scores, num_samples, *, sigma=SIGMA):
    out = np.empty(num_samples, dtype=np.int64)
    for i in range(num_samples):
        out[i] = np.argmax(scores + sigma * rng.standard_normal(scores.shape[0]))
    return out


def numpy_above_threshold_loop(rng, queries, num_samples, *, threshold, threshold_scale, query_scale):
    # Lyu, Su & Li (2017), Alg. 1 with c = 1, one run per iteration; -1 encodes "no query above".
    out = np.empty(num_samples, dtype=np.int64)
    for i in range(num_samples):
        noisy_threshold = threshold + rng.laplace(0.0, threshold_scale)
        above = queries + rng.laplace(0.0, query_scale, size=queries.shape[0]) >= noisy_threshold
        out[i] = np.argmax(above) if above.any() else -1
    return out


# --------------------------------------------------------------------------- timing

def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _total_variation(a, b, support):
    pa = np.array([np.mean(a == v) for v in support])
    pb = np.array([np.mean(b == v) for v in support])
    return 0.5 * float(np.abs(pa - pb).sum())


def compare_sampler(case, sample, data, numpy_loop, support, *, num_samples, loop_samples, chunk_size, repeats):
    key = jax.random.key(SEED)
    first_s, _ = _timed(lambda: draw_chunked(sample, key, data, min(num_samples, chunk_size), chunk_size))
    # The first call above compiles the full-chunk shape; a partial last chunk would compile once more, so warm it too.
    if num_samples % chunk_size:
        draw_chunked(sample, jax.random.fold_in(key, 1), data, num_samples % chunk_size, chunk_size)
    times, ours = [], None
    for r in range(repeats):
        repeat_key = jax.random.fold_in(key, 2 + r)
        elapsed, ours = _timed(lambda k=repeat_key: draw_chunked(sample, k, data, num_samples, chunk_size))
        times.append(elapsed)
    ours_s = min(times)
    limit = min(num_samples, loop_samples)
    loop_raw_s, reference = _timed(lambda: numpy_loop(np.random.default_rng(SEED), np.asarray(data), limit))
    loop_s = loop_raw_s * num_samples / limit
    return {
        "case": case, "num_samples": num_samples, "chunk_size": chunk_size,
        "ours_s": ours_s, "ours_first_call_s": first_s, "ours_samples_per_s": num_samples / ours_s,
        "numpy_loop_s": loop_s, "numpy_loop_timed_samples": limit, "numpy_loop_scaled": limit < num_samples,
        "numpy_loop_samples_per_s": limit / loop_raw_s, "ratio": loop_s / ours_s,
        "tv_distance_ours_vs_numpy": _total_variation(ours[:limit], reference, support),
    }


def run_audit(num_samples, chunk_size, warmup_samples):
    mechanism = audit.get("report-noisy-max[noise=gumbel]")
    x, x_prime = mechanism.worst_case_pairs[0]
    # First call: compiles the auditor's step for this block size. The auditor sizes its own steps (from a
    # byte budget of the backend); chunk_size is recorded only.
    first_s, _ = _timed(lambda: audit.audit(mechanism, x, x_prime, num_samples=warmup_samples,
                                            key=jax.random.key(SEED)))
    elapsed, result = _timed(lambda: audit.audit(mechanism, x, x_prime, num_samples=num_samples,
                                                 key=jax.random.key(SEED + 1)))
    return {
        "case": f"audit({mechanism.name}, k={len(x)})", "num_samples_per_side": num_samples,
        "chunk_size": chunk_size, "audit_s": elapsed, "warmup_audit_s": first_s,
        "warmup_samples_per_side": warmup_samples, "samples_per_s": 2 * num_samples / elapsed,
        "epsilon_lower": result.epsilon_lower, "claimed_epsilon": result.claimed_epsilon,
        "violated": result.violated,
    }


def _block_size(num_samples):
    # The auditor's block: a power of two, at least 1024, at most audit.SAMPLES_PER_CALL.
    return min(audit.SAMPLES_PER_CALL, max(1024, 1 << (int(num_samples) - 1).bit_length()))


def sampler_alone(mechanism, key, x, x_prime, num_samples):
    """The baseline: the mechanism's batched sampler on both datasets, one call each, blocked until ready."""
    return jax.block_until_ready((mechanism.sample(jax.random.fold_in(key, 0), x, num_samples),
                                  mechanism.sample(jax.random.fold_in(key, 1), x_prime, num_samples)))


def sampler_in_blocks(mechanism, key, x, x_prime, num_samples):
    """The same number of samples drawn as the auditor draws them (blocks, keys fold_in(key, block)), on device."""
    block = _block_size(num_samples)
    outs = [mechanism.sample(jax.random.fold_in(jax.random.fold_in(key, side), b), data, block)
            for side, data in enumerate((x, x_prime)) for b in range(-(-num_samples // block))]
    return jax.block_until_ready(outs)


def compare_audit_to_sampler(name, num_samples, repeats):
    """(d): end-to-end audit vs the sampler alone, same samples per side, same run, interleaved repeats."""
    mechanism = audit.get(name)
    x, x_prime = mechanism.worst_case_pairs[0]
    run_audit_once = lambda key: audit.audit(mechanism, x, x_prime, num_samples=num_samples, key=key)
    first = {}
    for label, fn in (("audit", run_audit_once),
                      ("sampler", lambda k: sampler_alone(mechanism, k, x, x_prime, num_samples)),
                      ("blocks", lambda k: sampler_in_blocks(mechanism, k, x, x_prime, num_samples))):
        first[label], _ = _timed(lambda fn=fn: fn(jax.random.key(SEED)))
    times = {"audit": [], "sampler": [], "blocks": []}
    result = None
    for r in range(repeats):
        key = jax.random.key(SEED + 1 + r)
        elapsed, _ = _timed(lambda: sampler_alone(mechanism, key, x, x_prime, num_samples))
        times["sampler"].append(elapsed)
        elapsed, result = _timed(lambda: run_audit_once(key))
        times["audit"].append(elapsed)
        elapsed, _ = _timed(lambda: sampler_in_blocks(mechanism, key, x, x_prime, num_samples))
        times["blocks"].append(elapsed)
    best = {label: min(values) for label, values in times.items()}
    return {
        "case": f"audit({name}) vs its sampler", "output_kind": mechanism.output_kind,
        "num_samples_per_side": num_samples, "audit_s": best["audit"], "sampler_alone_s": best["sampler"],
        "sampler_in_blocks_s": best["blocks"], "ratio": best["audit"] / best["sampler"],
        "ratio_to_blocks": best["audit"] / best["blocks"], "target_ratio": AUDIT_TARGET_RATIO,
        "meets_target": best["audit"] <= AUDIT_TARGET_RATIO * best["sampler"], "all_times_s": times,
        "first_call_s": first, "epsilon_lower": result.epsilon_lower, "claimed_epsilon": result.claimed_epsilon,
        "event": result.event, "violated": result.violated,
    }


def _git_sha():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _meta(args):
    try:
        load = list(os.getloadavg())
    except OSError:  # pragma: no cover (not on every platform)
        load = None
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": platform.machine(),
        "processor": platform.processor(), "node": platform.node(), "cpu_count": os.cpu_count(),
        "load_average_1_5_15": load, "devices": [str(d) for d in jax.devices()],
        "device_kind": jax.devices()[0].device_kind, "jax": jax.__version__,
        "jaxlib": _jaxlib_version(), "numpy": np.__version__,
        "gpuprivacy": gpuprivacy.__version__, "python": platform.python_version(), "git_sha": _git_sha(),
        "seed": SEED, "config": vars(args),
    }


def _jaxlib_version():
    try:
        import jaxlib
        return jaxlib.__version__
    except (ImportError, AttributeError):  # pragma: no cover
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=None,
                        help="samples for the sampler benchmarks (a), (b) (default 10^6; --quick 10^5, --gpu 10^7)")
    parser.add_argument("--audit-samples", type=int, default=None,
                        help="samples per side for the audits (c), (d) (default 10^6; --quick 10^5, --gpu 10^7)")
    parser.add_argument("--loop-samples", type=int, default=10**5,
                        help="samples the NumPy baseline loop is timed on before scaling (default 10^5)")
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="samples per device call in (a), (b) (default 10^5; 10^6 with --gpu)")
    parser.add_argument("--num-queries", type=int, default=NUM_CANDIDATES,
                        help="queries of AboveThreshold in (b) (default 100, matching d in (a))")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", choices=("all", "samplers", "audit"), default="all",
                        help="all (default), samplers: (a) and (b), audit: (c) and (d)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--gpu", action="store_true", help="bigger sizes: 10^7 samples per side, 10^6-sample chunks")
    mode.add_argument("--quick", action="store_true", help="smallest sizes: 10^5 samples (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = parser.parse_args(argv)
    mode_name, sizes = mode_sizes(args, MODES)
    args.samples, args.audit_samples, args.chunk_size = sizes["samples"], sizes["audit_samples"], sizes["chunk_size"]
    for name in ("samples", "audit_samples", "loop_samples", "chunk_size", "num_queries", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}.")

    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else (lambda *a: None)
    meta = _meta(args)
    meta["mode"] = mode_name
    results, audit_row, versus = [], None, []

    if args.cases in ("all", "samplers"):
        # (a) Gaussian report-noisy-max, d = 100, on a worst-case-like pair's first dataset.
        log("(a) gaussian report-noisy-max ...")
        scores = np.zeros(NUM_CANDIDATES)
        scores[0] = 1.0
        results.append(compare_sampler(
            f"gaussian-rnm d={NUM_CANDIDATES} sigma={SIGMA}", gaussian_rnm_sample, scores, numpy_gaussian_rnm_loop,
            range(NUM_CANDIDATES), num_samples=args.samples, loop_samples=args.loop_samples,
            chunk_size=args.chunk_size, repeats=args.repeats))

        # (b) Laplace AboveThreshold through the registered auditor entry, all queries at the threshold.
        log("(b) above-threshold ...")
        mechanism = audit.get("above-threshold", num_queries=args.num_queries, epsilon=ABOVE_THRESHOLD_EPSILON)
        queries, _ = mechanism.worst_case_pairs[0]
        threshold = 0.0  # the registry default; worst_case_pairs[0] puts every query at it
        # The baseline uses the library's own noise scales (Lyu, Su & Li 2017, Alg. 1, c = 1: 2/epsilon and 4/epsilon).
        info = mechanisms.above_threshold(jax.random.key(SEED), queries, threshold=threshold,
                                          epsilon=ABOVE_THRESHOLD_EPSILON).info
        baseline = functools.partial(numpy_above_threshold_loop, threshold=threshold,
                                     threshold_scale=float(info.threshold_scale), query_scale=float(info.query_scale))
        results.append(compare_sampler(
            f"above-threshold q={args.num_queries} (registry entry)", mechanism.sample, queries, baseline,
            range(-1, args.num_queries), num_samples=args.samples, loop_samples=args.loop_samples,
            chunk_size=args.chunk_size, repeats=args.repeats))

    if args.cases in ("all", "audit"):
        # (c) End-to-end audit.
        log("(c) end-to-end audit ...")
        audit_row = run_audit(args.audit_samples, args.chunk_size, warmup_samples=min(args.audit_samples,
                                                                                      2 * args.chunk_size))
        # (d) End-to-end audit vs the sampler alone.
        for name in ("report-noisy-max-gumbel", "laplace"):
            log(f"(d) audit({name}) vs its sampler ...")
            versus.append(compare_audit_to_sampler(name, args.audit_samples, args.repeats))
    meta["load_average_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None

    if args.json:
        json.dump({"meta": meta, "samplers": results, "audit": audit_row, "audit_vs_sampler": versus}, sys.stdout,
                  indent=1)
        print()
        return
    print(f"# bench_audit  {meta['date']}  {meta['machine']} ({meta['cpu_count']} CPUs)  "
          f"devices={meta['devices']}  jax {meta['jax']}  jaxlib {meta['jaxlib']}  numpy {meta['numpy']}")
    print(f"# load average (1/5/15 min): before {meta['load_average_1_5_15']}, after {meta['load_average_after']}")
    print(f"# git {meta['git_sha']}  seed {SEED}  mode {mode_name}  chunk_size {args.chunk_size}  "
          f"repeats {args.repeats}")
    if results:
        print()
        print(f"{'sampler':40s} {'n':>9s} {'ours/s':>12s} {'1st call':>9s} {'numpy loop/s':>13s} {'ratio':>8s} "
              f"{'TV':>7s}")
        for row in results:
            print(f"{row['case']:40s} {row['num_samples']:9d} {row['ours_samples_per_s']:12.4g} "
                  f"{row['ours_first_call_s']:8.2f}s {row['numpy_loop_samples_per_s']:13.4g} {row['ratio']:7.1f}x "
                  f"{row['tv_distance_ours_vs_numpy']:7.4f}")
        scaled = [r for r in results if r["numpy_loop_scaled"]]
        if scaled:
            print(f"  (NumPy loop timed on {scaled[0]['numpy_loop_timed_samples']} samples and scaled linearly to n; "
                  "TV = total variation between the two sides' histograms on those samples)")
    if audit_row is not None:
        print()
        a = audit_row
        print(f"{a['case']}: {a['num_samples_per_side']} samples per side in {a['audit_s']:.2f} s = "
              f"{a['samples_per_s']:.4g} samples/s (warm-up audit at {a['warmup_samples_per_side']}/side, "
              f"compiling: {a['warmup_audit_s']:.2f} s); epsilon_lower = {a['epsilon_lower']:.4f} "
              f"<= claimed {a['claimed_epsilon']} (violated: {a['violated']})")
    if versus:
        print()
        print(f"{'audit vs sampler alone':34s} {'n/side':>8s} {'audit':>8s} {'sampler':>8s} {'ratio':>7s} "
              f"{'blocks':>8s} {'ratio':>7s}  target")
        for v in versus:
            print(f"{v['case']:34s} {v['num_samples_per_side']:8d} {v['audit_s']:7.3f}s {v['sampler_alone_s']:7.3f}s "
                  f"{v['ratio']:6.2f}x {v['sampler_in_blocks_s']:7.3f}s {v['ratio_to_blocks']:6.2f}x  "
                  f"<= {v['target_ratio']}x: {'met' if v['meets_target'] else 'NOT met'}")
        print("  (audit = audit() end to end; sampler = entry.sample(key, x, n) on both datasets, one call each; "
              "blocks = the same samples drawn in the auditor's blocks; best of the repeats, interleaved)")


if __name__ == "__main__":
    main()
