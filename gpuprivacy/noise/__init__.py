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

# Building blocks for samplers defined elsewhere (e.g. the piecewise-Laplace sampler in
# gpuprivacy.mechanisms): raw random words, their exact uniforms, the truncated-exponential inverse CDF.
from gpuprivacy.noise._continuous import random_words as random_words
from gpuprivacy.noise._continuous import uniform_from_word as uniform_from_word
from gpuprivacy.noise._continuous import uniform_from_words as uniform_from_words
from gpuprivacy.noise._truncated import _truncated_exponential_inverse as truncated_exponential_inverse
