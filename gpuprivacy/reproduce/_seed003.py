"""Reproduction study for seed 003 (registered at import)."""
