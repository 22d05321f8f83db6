"""The package version (one place; gpuprivacy.__version__ re-exports it, and provenance records read it here)."""

__version__ = "0.1.0"
