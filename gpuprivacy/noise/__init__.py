"""Keyed noise samplers (no global state).

Continuous samplers are unit scale, ``(key, shape=(), dtype=None) -> Array``;
discrete samplers take their scale and return int64; the ``secure_*``
functions are the release path that keeps outputs on an exact grid.
"""

from gpuprivacy.noise._continuous import exponential as exponential
from gpuprivacy.noise._continuous import gaussian as gaussian
from gpuprivacy.noise._continuous import gumbel as gumbel
from gpuprivacy.noise._continuous import laplace as laplace
from gpuprivacy.noise._discrete import discrete_gaussian as discrete_gaussian
from gpuprivacy.noise._discrete import discrete_laplace as discrete_laplace
from gpuprivacy.noise._secure import secure_gaussian as secure_gaussian
from gpuprivacy.noise._secure import secure_laplace as secure_laplace
from gpuprivacy.noise._secure import secure_laplace_scale as secure_laplace_scale
from gpuprivacy.noise._truncated import truncated_exponential as truncated_exponential
from gpuprivacy.noise._truncated import truncated_laplace as truncated_laplace
