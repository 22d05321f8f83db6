"""Covering designs as subset families (seed 002): constructions, an exact verifier, bounds and a planner."""
