"""Auditor entries for the seed-002 mechanisms."""
