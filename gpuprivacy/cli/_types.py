"""Argument types shared by the subcommands: each parses one option and says what is wrong and how to fix it."""

from __future__ import annotations

import argparse
import math


def seed_argument(text):
    """A PRNG seed that jax.random.key accepts: an integer in [0, 2**63)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed must be an integer, got {text!r}.") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"--seed must be in [0, 2**63), got {value}; pass a smaller seed.")
    return value


def finite_float(name: str, *, positive: bool = False):
    """An argparse type for a finite real number (NaN and infinities refused by name); ``positive``: also > 0."""
    need = "finite and > 0" if positive else "finite"

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}.") from None
        if not math.isfinite(value) or (positive and value <= 0):
            raise argparse.ArgumentTypeError(f"{name} must be {need}, got {text!r}.")
        return value
    return parse


def positive_int(name: str):
    """An argparse type for an integer >= 1."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}.") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1, got {value}.")
        return value
    return parse
