"""`gpuprivacy estimate --mechanism ...` entries for seed 000 (registered at import)."""
