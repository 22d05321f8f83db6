"""Reproduction study for seed 000 (registered at import)."""
