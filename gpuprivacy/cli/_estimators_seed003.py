"""`gpuprivacy estimate --mechanism ...` entries for seed 003 (registered at import)."""
