"""Datasets: bundled data, seeded synthetic query vectors, on-device data distributions and a column loader."""

from gpuprivacy.datasets._bikes import BIKES_DAILY_POPULATION as BIKES_DAILY_POPULATION
from gpuprivacy.datasets._bikes import BikesDaily as BikesDaily
from gpuprivacy.datasets._bikes import bikes_daily_queries as bikes_daily_queries
from gpuprivacy.datasets._bikes import load_bikes_daily as load_bikes_daily
from gpuprivacy.datasets._synthetic import synthetic_energy_queries as synthetic_energy_queries
from gpuprivacy.datasets._synthetic import synthetic_uniform_queries as synthetic_uniform_queries
from gpuprivacy.datasets import _builtin_laws  # noqa: F401  (registers the built-in laws)
from gpuprivacy.datasets._distributions import Distribution as Distribution
from gpuprivacy.datasets._distributions import distribution as distribution
from gpuprivacy.datasets._distributions import draw as draw
from gpuprivacy.datasets._distributions import list_distributions as list_distributions
from gpuprivacy.datasets._distributions import register_distribution as register_distribution
from gpuprivacy.datasets._loaders import load_column as load_column
