"""Keeping old public spellings working while the API says one thing per name."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable


def renamed_keywords(**renames: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Accepts each old keyword ``old=`` as ``new=`` (with a DeprecationWarning).

    Used where a parameter was renamed so that one name means one thing across
    the public API (e.g. ``rho``, which means a zCDP budget elsewhere, became
    ``smoothness`` in the piecewise Laplace family). The wrapped function's
    signature (``inspect.signature``) shows only the new names.

    Examples:
      >>> @renamed_keywords(rho="smoothness")
      ... def f(*, smoothness=0.0):
      ...     return smoothness
      >>> import warnings
      >>> with warnings.catch_warnings():
      ...     warnings.simplefilter("ignore", DeprecationWarning)
      ...     f(rho=0.5)
      0.5
    """
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{fn.__name__}() got both {old}= (its old name) and {new}=; pass only {new}=.")
                    warnings.warn(f"{fn.__name__}({old}=...) is deprecated: the parameter is now called {new}= "
                                  f"({old} names a different quantity elsewhere in gpuprivacy).",
                                  DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)
        return wrapper
    return decorate
