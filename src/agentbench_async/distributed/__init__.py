"""Beyond one process: a run's episodes spread over worker processes on this machine (``--workers N``) or
over a Ray cluster (``--ray ADDRESS``), with the run's limits, its result file and its scheduler kept in
the driver.

Only this module is imported without Ray: it holds the settings (``ray:`` in the config, ``--ray`` and
``--workers`` on the command line). The rest of the package (``cluster``, ``worker``, ``leases``,
``evaluation``) imports Ray, which is the optional extra ``pip install agentbench-async[ray]``.

How it works (``docs/distributed.md`` has the user's view):
- the driver (the ``agentbench run`` process) lists the work, admits episodes under the run's concurrency
  limits, keeps the single DuckDB writer and prints progress, exactly as a local run;
- one ``LimitBroker`` actor holds each model's limits (requests in flight, requests/min, tokens/min, the
  model-wide pause after a 429); every HTTP attempt of every worker leases its slot from it;
- ``EpisodeWorker`` actors (one per process) start the run's environments where they run, open the model
  clients and play whole episodes; the finished record goes back to the driver's writer.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

LOCAL = "local"  # start a Ray instance on this machine for the run (``--workers N`` alone, or ``--ray`` alone)
_KEYS = {"address", "workers", "worker_cpus", "start_timeout_s"}


@dataclass(frozen=True)
class RaySettings:
    """Where a run's episodes go (operational: never part of the results' fingerprint)."""

    address: str = LOCAL  # local | auto | HOST:PORT | ray://HOST:PORT
    workers: int | None = None  # worker processes; None: one per CPU (this machine's, or the cluster's)
    worker_cpus: float = 1.0  # CPUs Ray reserves for each worker process
    start_timeout_s: float = 600.0  # how long workers may take to start (the os sandbox's root is built once per node)

    def public_dict(self) -> dict[str, Any]:
        return {"address": self.address, "workers": self.workers, "worker_cpus": self.worker_cpus}


def ray_settings(raw: Any, *, where: str) -> RaySettings | None:
    """``ray:`` of the config: ``true``/``local``/an address string, or a mapping of the settings above."""
    if raw is None or raw is False:
        return None
    if raw is True:
        raw = {}
    if isinstance(raw, str):
        raw = {"address": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: ray: expected an address (auto, HOST:PORT, ray://HOST:PORT, local) or a mapping with 'address'/'workers'")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: ray: unknown setting {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
    address = raw.get("address") or LOCAL
    if not isinstance(address, str):
        raise ConfigError(f"{where}: ray.address: expected a string such as auto or 10.0.0.1:6379, got {address!r}")
    port = address.rpartition(":")[2]
    if ":" in address and port.isdigit() and not 0 < int(port) <= 65535:  # the OS would wrap 99999 to 34463
        raise ConfigError(f"{where}: ray.address: {address!r} has port {port}, not a TCP port; give HOST:PORT with a port 1-65535")
    workers = raw.get("workers")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ConfigError(f"{where}: ray.workers: expected an integer >= 1, got {workers!r}")
    cpus = raw.get("worker_cpus", 1.0)
    if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus <= 0:
        raise ConfigError(f"{where}: ray.worker_cpus: expected a number of CPUs > 0, got {cpus!r}")
    timeout = raw.get("start_timeout_s", 600.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ConfigError(f"{where}: ray.start_timeout_s: expected seconds > 0, got {timeout!r}")
    return RaySettings(address=address, workers=workers, worker_cpus=float(cpus), start_timeout_s=float(timeout))


def require_ray() -> None:
    """A clear error when Ray is asked for but not installed."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError("--ray/--workers need Ray: pip install 'agentbench-async[ray]' (on the driver and on every node)")


__all__ = ["LOCAL", "RaySettings", "ray_settings", "require_ray"]
