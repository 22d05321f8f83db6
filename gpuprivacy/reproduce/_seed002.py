"""Reproduction study for seed 002 (registered at import)."""
