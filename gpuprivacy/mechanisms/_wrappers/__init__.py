"""Private: see the public namespace that re-exports this family."""
