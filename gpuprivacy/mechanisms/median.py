"""Optimal private median (seed 003).

*Optimal Private Median Estimation under Minimal Distributional
Assumptions*: the general density (3.6) with its certified fast path, and
the median baselines. This module only re-exports.
"""
