"""gpuprivacy: differential privacy over black-box functions, batched on accelerators.

Importing gpuprivacy enables float64 in JAX (see :mod:`gpuprivacy._config`).
"""

from gpuprivacy import _config  # noqa: F401  (enables jax_enable_x64 first)
from gpuprivacy import accounting as accounting
from gpuprivacy import noise as noise
from gpuprivacy.accounting import ApproxDP as ApproxDP
from gpuprivacy.accounting import PureDP as PureDP
from gpuprivacy.accounting import ZCDP as ZCDP

__version__ = "0.1.0"
