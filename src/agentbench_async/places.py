"""Places for episodes shared fairly between models: ``max_concurrency`` for the run and each environment's capacity.

A FIFO semaphore gives a free place to whoever asked first, so a model whose episodes are slow (a slow server, long
games) ends up holding most of the places: its episodes keep them longest, and every place freed is as likely to be
taken by it again. Here a freed place goes to the waiting model that holds the fewest places (the one that asked
first among equals), so while several models wait each holds an equal share and a slow model never holds the others
back; a model takes more than its share only when no other model is waiting. With one model it is a FIFO semaphore.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque


_Entry = tuple[int, "asyncio.Future[None]"]  # a waiting request: its place in line, the future its place is handed to


class FairPlaces:
    """``total`` places; each model asks and gives back through its own ``for_model`` view."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._used: dict[str, int] = {}
        self._in_use = 0  # the sum of _used, kept as places are taken and given back (read for every episode admitted)
        self._queued = 0  # entries in the _waiting queues, cancelled ones not yet dropped included
        self._waiting: dict[str, deque[_Entry]] = {}
        self._order = itertools.count()

    def for_model(self, model: str) -> ModelPlaces:
        return ModelPlaces(self, model)

    def _free(self) -> int:
        return self.total - self._in_use

    def _someone_waits(self) -> bool:
        return self._queued > 0 and any(not f.done() for queue in self._waiting.values() for _, f in queue)

    def _take(self, model: str) -> None:
        self._used[model] = self._used.get(model, 0) + 1
        self._in_use += 1

    def _give_back(self, model: str) -> None:
        self._used[model] -= 1
        self._in_use -= 1
        if self._queued:
            self._hand_out()

    def _enqueue(self, model: str, entry: _Entry) -> deque[_Entry]:
        queue = self._waiting.setdefault(model, deque())
        queue.append(entry)
        self._queued += 1
        return queue

    def _dequeue(self, queue: deque[_Entry], entry: _Entry | None = None) -> _Entry:
        """Drop ``entry`` from ``queue`` (None: its first)."""
        if entry is None:
            entry = queue.popleft()
        else:
            queue.remove(entry)
        self._queued -= 1
        return entry

    def _hand_out(self) -> None:
        """Free places to the waiting models holding the fewest (ties: the longest waiting)."""
        while self._free() > 0:
            for queue in self._waiting.values():
                while queue and queue[0][1].done():  # cancelled while waiting
                    self._dequeue(queue)
            queues = [(self._used.get(m, 0), q[0][0], m) for m, q in self._waiting.items() if q]
            if not queues:
                return
            _, _, model = min(queues)
            _, future = self._dequeue(self._waiting[model])
            self._take(model)
            future.set_result(None)


class ModelPlaces:
    """One model's view of the shared places (what the scheduler's semaphores were: ``locked``, ``acquire``, ``release``)."""

    def __init__(self, places: FairPlaces, model: str) -> None:
        self.places, self.model = places, model

    def locked(self) -> bool:
        """Whether this model's next ``acquire`` would wait."""
        return self.places._free() <= 0 or self.places._someone_waits()  # noqa: SLF001

    async def acquire(self) -> None:
        places = self.places
        if not self.locked():
            places._take(self.model)  # noqa: SLF001
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (next(places._order), future)  # noqa: SLF001
        queue = places._enqueue(self.model, entry)  # noqa: SLF001
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted as the wait was cancelled: the place goes back
                places._give_back(self.model)  # noqa: SLF001
            else:
                if entry in queue:
                    places._dequeue(queue, entry)  # noqa: SLF001
                places._hand_out()  # noqa: SLF001 - the others may take what this one waited for
            raise

    def release(self) -> None:
        self.places._give_back(self.model)  # noqa: SLF001
