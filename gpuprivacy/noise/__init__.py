"""Keyed noise samplers (no global state)."""

from gpuprivacy.noise._continuous import exponential as exponential
from gpuprivacy.noise._continuous import gaussian as gaussian
from gpuprivacy.noise._continuous import gumbel as gumbel
from gpuprivacy.noise._continuous import laplace as laplace
