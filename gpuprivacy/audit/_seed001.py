"""Auditor entries for the seed-001 mechanisms."""
