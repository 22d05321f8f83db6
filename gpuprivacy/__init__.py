"""gpuprivacy: differential privacy over black-box functions, batched on accelerators.

Importing gpuprivacy enables float64 in JAX and, on a CPU, asks XLA for its loop emitters, which compile
the mechanisms' programs with 0.58 times the CPU time (see :mod:`gpuprivacy._config`).

Subpackages:
  subsets: subset families (removals, partitions, random subsets, masks).
  designs: covering designs (Steinke & Steinke 2025) as subset families.
  oracle: batched, isolating evaluation of untrusted statistics; ready oracles.
  noise: keyed samplers (continuous, truncated, discrete, secure grid release).
  mechanisms: classic DP mechanisms returning ``Release(value, info)``.
  accounting: PureDP / ApproxDP / ZCDP guarantees, conversions, composition.
  audit: empirical privacy auditing of every registered mechanism.
  datasets, sweeps, reproduce: bundled data, resumable sweeps, studies.
"""

from gpuprivacy import _config  # noqa: F401  (enables jax_enable_x64 first)
from gpuprivacy import accounting as accounting
from gpuprivacy import datasets as datasets
from gpuprivacy import designs as designs
from gpuprivacy import mechanisms as mechanisms
from gpuprivacy import noise as noise
from gpuprivacy import oracle as oracle
from gpuprivacy import subsets as subsets
from gpuprivacy import audit as audit
from gpuprivacy import reproduce as reproduce
from gpuprivacy import sweeps as sweeps
from gpuprivacy._config import use_cpu_cores as use_cpu_cores
from gpuprivacy._typing import OracleFn as OracleFn
from gpuprivacy.accounting import ApproxDP as ApproxDP
from gpuprivacy.accounting import PureDP as PureDP
from gpuprivacy.accounting import ZCDP as ZCDP
from gpuprivacy.mechanisms import Release as Release
from gpuprivacy.oracle import evaluate as evaluate

from gpuprivacy._version import __version__ as __version__
