"""Sandboxes made ahead and closed behind: off the episode's path.

An episode's machine before its task begins is the same for every task: a fresh sandbox with the agent's
login shell started in it (the shell starts before the init scripts, as upstream's does). So while episodes
run, a couple of such machines are made ahead, and an episode that begins takes one instead of waiting
for its own (sandbox start + ``bash --login``: 30-60 ms). An episode that ends hands its machine back to be
closed in the background. :meth:`Spares.close` (the environment's close) waits for the closes under way and
closes the spares, so a run leaves nothing behind.

Spares are made only once an environment has begun a second episode on the same event loop (a stream of
episodes, not a one-off), and never for an event loop other than the one that made them. (Spares left by an
event loop that ended are dropped, not closed: their processes belong to that loop. Their wardens exit when
their sockets are collected, killing the sandboxes; the next run's sweep removes their state folders.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .sandbox import Sandbox
from .shell import AgentShell

SPARE_MACHINES = 2  # made ahead while episodes run


@dataclass
class Machine:
    """A started sandbox and the agent's login shell in it."""

    sandbox: Sandbox
    shell: AgentShell

    def alive(self) -> bool:
        return self.sandbox.running() and self.shell.running()

    async def close(self) -> None:
        """Never raises."""
        with contextlib.suppress(Exception):  # closing the sandbox kills the shell anyway
            self.shell.close_terminal()
        await self.sandbox.close()


class Spares:
    """Machines made ahead (see the module's doc); ``make`` starts one."""

    def __init__(self, make: Callable[[], Awaitable[Machine]], wanted: int = SPARE_MACHINES) -> None:
        self._make = make
        self._wanted = wanted
        self._ready: list[Machine] = []
        self._filling: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._taken = 0

    async def take(self) -> Machine:
        """A machine for an episode: a spare made ahead, else one made now; then more spares are made."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # another event loop's machines cannot serve this one
            self._ready.clear()
            self._filling, self._closing, self._loop, self._taken = None, set(), loop, 0
        self._taken += 1
        machine = None
        while self._ready and machine is None:
            spare = self._ready.pop(0)
            if spare.alive():
                machine = spare
            else:
                self.release(spare)
        if self._taken >= 2 and self._wanted and (self._filling is None or self._filling.done()):
            self._filling = loop.create_task(self._fill())
        if machine is None:
            machine = await self._make()
        return machine

    def release(self, machine: Machine) -> None:
        """Close an episode's machine in the background (:meth:`settle` waits for it)."""
        task = asyncio.get_running_loop().create_task(machine.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def settle(self) -> None:
        """Wait until the machines being made and closed are done."""
        while self._closing or (self._filling is not None and not self._filling.done()):
            pending = [*self._closing, *([self._filling] if self._filling is not None else [])]
            await asyncio.gather(*pending, return_exceptions=True)

    async def close(self) -> None:
        """Finish what is under way and close the spares. Spares are made again by later episodes."""
        wanted, self._wanted = self._wanted, 0
        try:
            await self.settle()
            spares, self._ready = self._ready, []
            await asyncio.gather(*(m.close() for m in spares))
        finally:
            self._wanted, self._taken = wanted, 0

    async def _fill(self) -> None:
        """Make the missing spares, at once (one core makes a machine while the other runs the episode)."""
        while self._wanted and len(self._ready) < self._wanted:
            made = await asyncio.gather(*(self._make() for _ in range(self._wanted - len(self._ready))), return_exceptions=True)
            failed = [m for m in made if isinstance(m, BaseException)]
            for machine in made:
                if isinstance(machine, Machine):
                    if self._wanted and len(self._ready) < self._wanted:
                        self._ready.append(machine)
                    else:  # closed meanwhile
                        await machine.close()
            if failed:  # the next episode makes its own and says what failed
                return
