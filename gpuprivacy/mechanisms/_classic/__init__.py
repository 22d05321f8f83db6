"""Additive-noise mechanisms (Laplace, Gaussian); the public names live in :mod:`gpuprivacy.mechanisms`."""

from gpuprivacy.mechanisms._classic._additive import LaplaceInfo as LaplaceInfo
