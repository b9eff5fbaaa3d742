"""The names environments go by: AgentBench's eight, the built-in table (name -> "module:Class", imported only when
used) and the installed packages' environment entry points (``plugins()``).

The registry (``envs/__init__.py``) resolves a name with these tables; a file environment (``files.py``) checks against
them that its name is free. Nothing here imports an environment.
"""

from __future__ import annotations

import functools
import importlib.metadata
from dataclasses import dataclass, replace

# The eight AgentBench environments (contract names), then engine self-test environments.
ENV_NAMES: tuple[str, ...] = ("os", "db", "kg", "card_game", "ltp", "alfworld", "webshop", "mind2web")

_REGISTRY: dict[str, str] = {
    "os": "agentbench_async.envs.os_interaction:OSEnvironment",
    "db": "agentbench_async.envs.db:DBEnvironment",
    "kg": "agentbench_async.envs.kg:KGEnvironment",
    "ltp": "agentbench_async.envs.ltp:LTPEnvironment",
    "card_game": "agentbench_async.envs.card_game:CardGameEnvironment",
    "alfworld": "agentbench_async.envs.alfworld:ALFWorldEnvironment",
    "webshop": "agentbench_async.envs.webshop:WebShopEnvironment",
    "mind2web": "agentbench_async.envs.mind2web:Mind2WebEnvironment",
    "echo": "agentbench_async.envs.echo:EchoEnvironment",
}


PLUGIN_GROUP = "agentbench_async.environments"  # the entry point group of environment plugins


@dataclass(frozen=True)
class Plugin:
    """An environment an installed package declares (entry point ``name = target``)."""

    name: str
    target: str  # "module:EnvironmentClass"
    package: str  # the distribution declaring it, "name version"
    refused: str | None = None  # why it is not used (its name is a built-in's or another plugin's)


@functools.cache
def plugins() -> dict[str, Plugin]:
    """The installed packages' environment entry points by name (refused ones included, with the reason)."""
    found: dict[str, Plugin] = {}
    for ep in sorted(importlib.metadata.entry_points(group=PLUGIN_GROUP), key=lambda e: (e.name, e.value)):
        dist = getattr(ep, "dist", None)
        package = f"{dist.metadata['Name']} {dist.version}" if dist is not None else f"the package of {ep.value}"
        if ep.name in _REGISTRY:
            found[ep.name] = Plugin(ep.name, ep.value, package, f"a built-in environment is named {ep.name!r}; rename the "
                                    f"entry point in {package}'s pyproject.toml")  # fmt: skip
        elif ep.name not in found:
            found[ep.name] = Plugin(ep.name, ep.value, package)
        elif (found[ep.name].target, found[ep.name].package) != (ep.value, package) and not found[ep.name].refused:
            found[ep.name] = replace(found[ep.name], refused=f"{package} declares {ep.name!r} too; uninstall one of them "
                                     "or rename its entry point")  # fmt: skip
    return found
