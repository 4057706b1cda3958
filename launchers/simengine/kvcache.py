"""KV block pool with prefix caching, as vLLM V1's block pool and KV cache manager keep it.

vLLM hashes every full block by its tokens and the hash of the block before it, so a block can
be reused only if the whole chain before it is cached too. Freed blocks join the tail of a free
queue; allocation takes from the head, evicting the cached block it finds there (least
recently freed first). A block referenced by a running request is never evicted.

Counting every block separately is too slow for 100K-token prompts, so chains are kept as
``Entry`` runs: an entry is one request's run of consecutive blocks of a hash chain, starting
at block index ``start`` after its ``parent`` (the run it continues). Its first ``ref`` blocks
are referenced by running requests; blocks ``ref..cached`` are free but still cached, and sit
in the free queue as one segment (re-queued at the tail when more of them are freed). The free
queue is an ordered list of such segments plus plain (hashless) segments, so eviction follows
vLLM's order run by run instead of block by block.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Hashable


class Entry:
    """A run of cached blocks of one hash chain (see module docstring)."""

    __slots__ = ("cached", "holders", "key", "parent", "ref", "seg", "start")

    def __init__(self, key: Hashable, parent: Entry | None, start: int) -> None:
        self.key = key
        self.parent = parent
        self.start = start  # chain index of this run's first block
        self.cached = 0  # blocks of the run still in the pool
        self.ref = 0  # blocks 0..ref of the run are referenced by running requests
        self.holders: dict[int, int] = {}  # request id -> blocks of the run it references
        self.seg: int | None = None  # id of its free segment, if any

    def avail(self) -> int:
        """Blocks of the chain (from index 0) still cached up to this run's end."""
        if self.parent is not None and self.parent.avail() < self.start:
            return self.parent.avail()
        return self.start + self.cached


class BlockPool:
    """Free queue, cached runs and their references (counts, not block objects)."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.total = num_blocks
        self.block_size = block_size
        self.free = num_blocks
        self._ids = itertools.count()
        self._queue: OrderedDict[int, list] = OrderedDict()  # seg id -> [Entry | None, count]
        if num_blocks:
            self._queue[next(self._ids)] = [None, num_blocks]

    @property
    def usage(self) -> float:
        return (self.total - self.free) / self.total if self.total else 0.0

    def take(self, n: int) -> None:
        """Allocate ``n`` blocks from the head of the free queue, evicting cached runs."""
        assert n <= self.free, (n, self.free)
        self.free -= n
        while n:
            sid, seg = next(iter(self._queue.items()))
            c = min(seg[1], n)
            seg[1] -= c
            n -= c
            if seg[0] is not None:
                seg[0].cached -= c  # evict from the run's free tail
            if seg[1] == 0:
                del self._queue[sid]
                if seg[0] is not None:
                    seg[0].seg = None

    def give_plain(self, n: int) -> None:
        """Return ``n`` hashless blocks (partial blocks, unreusable ones) to the queue tail."""
        if n <= 0:
            return
        self.free += n
        if self._queue:
            sid = next(reversed(self._queue))
            if self._queue[sid][0] is None:
                self._queue[sid][1] += n
                return
        self._queue[next(self._ids)] = [None, n]

    def reference(self, entry: Entry, rid: int, upto: int) -> None:
        """Request ``rid`` now references the first ``upto`` blocks of ``entry``."""
        entry.holders[rid] = upto
        if upto > entry.ref:
            self._unfree(entry, upto - entry.ref)
            entry.ref = upto

    def grow(self, entry: Entry, rid: int, n: int) -> None:
        """``rid`` registered ``n`` newly computed full blocks at the end of its own run."""
        entry.cached += n
        entry.ref = entry.cached
        entry.holders[rid] = entry.cached

    def release(self, entry: Entry, rid: int) -> None:
        """``rid`` drops its references to ``entry``: unreferenced blocks become evictable."""
        entry.holders.pop(rid, None)
        new_ref = max(entry.holders.values(), default=0)
        if new_ref < entry.ref:
            freed = entry.ref - new_ref
            entry.ref = new_ref
            self.free += freed
            count = freed
            if entry.seg is not None:
                count += self._queue.pop(entry.seg)[1]
            entry.seg = next(self._ids)
            self._queue[entry.seg] = [entry, count]

    def _unfree(self, entry: Entry, n: int) -> None:
        assert entry.seg is not None, "referencing blocks that are not free"
        seg = self._queue[entry.seg]
        seg[1] -= n
        self.free -= n
        if seg[1] == 0:
            del self._queue[entry.seg]
            entry.seg = None

    def check(self) -> None:
        """Invariants (for tests): queue counts add up, runs agree with their segments."""
        assert sum(s[1] for s in self._queue.values()) == self.free
        for seg in self._queue.values():
            if seg[0] is not None:
                assert seg[0].cached - seg[0].ref == seg[1], (seg[0].cached, seg[0].ref, seg[1])
