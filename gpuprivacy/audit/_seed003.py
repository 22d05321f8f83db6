"""Auditor entries for the seed-003 mechanisms."""
