"""Lazy access to matplotlib for the reproductions (one implementation: :mod:`gpuprivacy._plots`)."""

from __future__ import annotations

import functools

from gpuprivacy._plots import require_matplotlib as _require

require_matplotlib = functools.partial(_require, "gpuprivacy.reproduce")
