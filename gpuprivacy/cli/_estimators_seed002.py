"""`gpuprivacy estimate --mechanism ...` entries for seed 002 (registered at import)."""
