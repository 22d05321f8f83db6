"""`gpuprivacy estimate --mechanism ...` entries for seed 001 (registered at import)."""
