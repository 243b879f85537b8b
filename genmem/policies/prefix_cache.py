"""Key/value caches of recent prompts, so a prompt that begins like one of them skips that part.

An agent's calls share long beginnings: every call of a role starts with the same system prompt
and tool descriptions, and a coordinator's next call is its last prompt plus the last reply and
an observation. Prefill is a quarter to a third of a local query's time on CPU; a prompt whose
first n tokens were read before starts from a copy of those n tokens' keys and values and reads
only the rest. The result is the one a full prefill gives (tested on the real model: same
replies), up to float rounding of a prefill in two chunks instead of one.

The cache belongs to one set of weights: :class:`PrefixCache` forgets everything when the model
that generates (or its vocabulary) changes, and fresh loads, which are trained, have none.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from typing import Any

__all__ = ["PrefixCache", "cache_owner"]


def cache_owner(runner: Any, tokenizer: Any) -> tuple[Any, ...]:
    """What names the weights a cache belongs to: the module, its embedding and vocabulary."""
    weight = runner.get_input_embeddings().weight
    return (id(runner), weight.data_ptr(), tuple(weight.shape), len(tokenizer))


def _common_prefix(a: tuple[int, ...], b: list[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _crop(cache: Any, drop: int) -> bool:
    """Cut the last ``drop`` tokens off ``cache``; False where it cannot be cut back.

    A sliding-window layer (Gemma 3) that has gone past its window no longer holds the keys of
    the tokens before the window, so it cannot be cut back to an earlier position.
    """
    if drop <= 0:
        return True
    try:
        cache.crop(-drop)
    except RuntimeError:
        return False
    return True


class PrefixCache:
    """The key/value caches of the last prompts of one model (an LRU bounded in tokens)."""

    def __init__(self, max_tokens: int = 6144, min_tokens: int = 32) -> None:
        """Hold at most ``max_tokens`` tokens; reuse a shared start of >= ``min_tokens`` tokens."""
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self._items: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._owner: Any = None
        self._lock = threading.Lock()
        self.reused_tokens = 0
        self.prompt_tokens = 0

    def take(self, ids: list[int], owner: Any) -> Any:
        """A private copy of the cache of ``ids``' longest known beginning, or None.

        ``owner`` names the weights (a key that changes with the model or its vocabulary); a
        new owner empties the cache. At least the last token is left to read, so the model
        always has input.
        """
        with self._lock:
            if owner != self._owner:
                self._items.clear()
                self._owner = owner
            self.prompt_tokens += len(ids)
            best, n = None, 0
            for key in self._items:
                m = _common_prefix(key, ids)
                if m > n:
                    best, n = key, m
            n = min(n, len(ids) - 1)
            if best is None or n < self.min_tokens:
                return None
            self._items.move_to_end(best)
            cache = copy.deepcopy(self._items[best])
        if not _crop(cache, cache.get_seq_length() - n):
            return None
        with self._lock:
            self.reused_tokens += n
        return cache

    def put(self, ids: list[int], cache: Any, owner: Any) -> None:
        """Keep ``cache`` (prompt ``ids`` and perhaps a reply after them) as the cache of ``ids``.

        The reply part is cut off. Entries that ``ids`` extends are dropped: the new one serves
        every prompt they served. ``owner`` as in :meth:`take`.
        """
        if cache is None or len(ids) < self.min_tokens or len(ids) > self.max_tokens:
            return
        drop = cache.get_seq_length() - len(ids)
        if drop < 0 or not _crop(cache, drop):
            return  # not a cache of this prompt, or one that cannot be cut back to it
        key = tuple(ids)
        with self._lock:
            if owner != self._owner:  # other weights: what was kept is theirs
                self._items.clear()
                self._owner = owner
            for old in [k for k in self._items if k == key[: len(k)]]:
                del self._items[old]
            self._items[key] = cache
            while sum(len(k) for k in self._items) > self.max_tokens:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every cache (call after changing the weights in place)."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
