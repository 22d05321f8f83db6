"""A bounded least-recently-used mapping for the library's caches of compiled programs and traced shapes.

A long notebook session or sweep builds programs for many shapes and parameters; an unbounded module-level
dict would keep every one of them (and their device buffers) for the life of the process. Every such cache
in the library is a :class:`LRUCache` with a documented ``maxsize``: reading an entry marks it recently
used, inserting past ``maxsize`` drops the least recently used one (which is rebuilt if it is needed again).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable


class LRUCache(OrderedDict):
    """An ``OrderedDict`` that keeps at most ``maxsize`` entries, dropping the least recently used first.

    Args:
      maxsize: the most entries kept (a positive int); may be changed later (the next insertion trims).

    Example:
      >>> cache = LRUCache(2)
      >>> cache["a"], cache["b"] = 1, 2
      >>> _ = cache["a"]          # "a" is now the most recently used
      >>> cache["c"] = 3          # drops "b"
      >>> list(cache)
      ['a', 'c']
    """

    def __init__(self, maxsize: int):
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"maxsize must be a positive int, got {maxsize!r}.")
        super().__init__()
        self.maxsize = maxsize

    def __getitem__(self, key: Hashable) -> Any:
        value = super().__getitem__(key)
        self.move_to_end(key)
        return value

    def __setitem__(self, key: Hashable, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxsize:
            self.popitem(last=False)

    def get(self, key: Hashable, default: Any = None) -> Any:
        return self[key] if key in self else default

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The entry for ``key``, built by ``build()`` and stored if it is missing."""
        if key in self:
            return self[key]
        value = build()
        self[key] = value
        return value
