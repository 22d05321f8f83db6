"""Datasets bundled with gpuprivacy and seeded synthetic query vectors."""

from gpuprivacy.datasets._bikes import BIKES_DAILY_POPULATION as BIKES_DAILY_POPULATION
from gpuprivacy.datasets._bikes import BikesDaily as BikesDaily
from gpuprivacy.datasets._bikes import bikes_daily_queries as bikes_daily_queries
from gpuprivacy.datasets._bikes import load_bikes_daily as load_bikes_daily
from gpuprivacy.datasets._synthetic import synthetic_energy_queries as synthetic_energy_queries
from gpuprivacy.datasets._synthetic import synthetic_uniform_queries as synthetic_uniform_queries
