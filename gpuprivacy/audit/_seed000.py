"""Auditor entries for the seed-000 mechanisms."""
