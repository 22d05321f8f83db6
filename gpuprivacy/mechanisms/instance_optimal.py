"""Piecewise Laplace and inverse sensitivity (seed 001).

Durfee, *Unifying Laplace Mechanism with Instance Optimality in Differential
Privacy*: the piecewise Laplace mechanism, the inverse sensitivity
mechanism, smooth-sensitivity baselines and the local bounds they need.
This module only re-exports; the code lives in private modules.
"""
