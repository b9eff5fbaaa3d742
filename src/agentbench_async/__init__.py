"""agentbench-async: AgentBench as a high-throughput asyncio evaluation engine."""

import os as _os
import sys as _sys

__version__ = "0.1.0"

# Arrow (the run's writer and live snapshot) allocates from jemalloc, which gives freed pages back to the system within
# about a second whichever thread freed them. Arrow's Linux default, mimalloc, keeps what a thread freed in that
# thread's heap: over a million episodes its arena climbed 2 -> 183 MB resident for ~30 MB allocated
# (docs/performance.md). Arrow reads the variable once, when pyarrow is imported, so this is set here, before any part
# of the engine imports it; a pool the user named stands, and a process that imported pyarrow first keeps its pool
# (the writer then switches pyarrow's own calls: store/writer.py). Arrow's Linux wheels carry jemalloc.
if _sys.platform == "linux" and "pyarrow" not in _sys.modules:
    _os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
