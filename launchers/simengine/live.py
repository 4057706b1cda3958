"""The simulated engine paced in real time, for the HTTP server.

One asyncio task runs the engine core step by step (no bulk stretches): it runs a step, sleeps
until the step's modelled end, then hands each request the chunks the step produced (one chunk
per scheduled decode: 1 token, or 1 + accepted draft tokens under speculative decoding). The
core's clock is wall time since start-up, so requests arrive at their real times and the
async-scheduling admission lag, prefix hits and preemptions happen as in virtual time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from launchers.simengine.core import EngineDead
from launchers.simengine.engine import SimEngine
from launchers.simengine.scheduler import SimRequest
from launchers.simengine.tokens import block_hashes, recurring_share

END = -1  # queue marker: the request finished


@dataclass(eq=False)
class _Stream:
    req: SimRequest
    queue: asyncio.Queue[int] = field(default_factory=asyncio.Queue)
    delivered: int = 0


class LiveEngine:
    """Serves requests from coroutines, pacing the simulated steps in wall time."""

    def __init__(self, engine: SimEngine) -> None:
        self.engine = engine
        self.core = engine.core
        self.t0 = time.monotonic()
        self._streams: list[_Stream] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def dead(self) -> str | None:
        return self.engine.dead

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def generate(self, ids: Sequence[int], max_tokens: int) -> AsyncIterator[int]:
        """Yields the token count of each chunk as the engine produces it."""
        if self.dead:
            raise EngineDead(self.dead)
        bs = self.core.pool.block_size
        req = SimRequest(self.core.new_rid(), len(ids), max_tokens, hashes=block_hashes(ids, bs))
        if self.core.lookup:
            req.draft_match = recurring_share(ids)
        req.arrival = self._now()
        stream = _Stream(req)
        self._streams.append(stream)
        self.core.add(req)
        self._wake.set()
        while (tokens := await stream.queue.get()) != END:
            yield tokens
        if not req.done:
            raise EngineDead(self.dead or "request aborted")

    def _now(self) -> float:
        return time.monotonic() - self.t0

    async def _run(self) -> None:
        core = self.core
        while True:
            if not core.busy:
                self._wake.clear()
                await self._wake.wait()
                core.clock = max(core.clock, self._now())
                continue
            try:
                dt = core.step()
            except EngineDead as dead:
                self._fail_all(str(dead))
                return
            if dt == 0.0:  # only not-yet-visible arrivals: let the clock move on
                await asyncio.sleep(0.001)
                core.clock = max(core.clock, self._now())
                continue
            await asyncio.sleep(max(0.0, self.t0 + core.clock - time.monotonic()))
            self._deliver()

    def _deliver(self) -> None:
        keep = []
        for s in self._streams:
            chunks = s.req.chunk_tokens
            for tokens in chunks[s.delivered :]:
                s.queue.put_nowait(tokens)
            s.delivered = len(chunks)
            if s.req.done:
                s.queue.put_nowait(END)
            else:
                keep.append(s)
        self._streams = keep

    def _fail_all(self, line: str) -> None:
        self.engine.dead = line
        self.engine.log(f"ERROR EngineCore encountered a fatal error. {line}")
        for s in self._streams:
            s.queue.put_nowait(END)
        self._streams = []
