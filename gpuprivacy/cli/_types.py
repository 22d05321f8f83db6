"""Argument types shared by the subcommands: each parses one option and says what is wrong and how to fix it."""

from __future__ import annotations

import argparse


def seed_argument(text):
    """A PRNG seed that jax.random.key accepts: an integer in [0, 2**63)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed must be an integer, got {text!r}.") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"--seed must be in [0, 2**63), got {value}; pass a smaller seed.")
    return value


def finite_float(name: str):
    """An argparse type for a finite real number (NaN and infinities are refused by name)."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}.") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{name} must be finite, got {text!r}.")
        return value
    return parse
