"""Reproduction study for seed 001 (registered at import)."""
