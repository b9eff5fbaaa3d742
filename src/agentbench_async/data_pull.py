"""``agentbench data pull``: download the official AgentBench data files from pinned commits and check
each against the sha256 in ``data_manifest.json``. Files already present with the right hash are kept;
a file whose download does not match is not written (the command fails naming it)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import aiohttp
from rich.console import Console
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from .bounds import BodyTooLarge, read_body
from .errors import AgentBenchError
from .models.network import Route, client_session, request_kwargs, route

DEFAULT_BASE_URL = "https://raw.githubusercontent.com/THUDM/AgentBench"
_MANIFEST = Path(__file__).with_name("data_manifest.json")


class DataPullError(AgentBenchError):
    """A download failed or did not match its pinned hash."""


class _Transient(Exception):
    pass


def manifest() -> list[dict[str, Any]]:
    files: list[dict[str, Any]] = json.loads(_MANIFEST.read_text(encoding="utf-8"))["files"]
    return files


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


async def _fetch(session: aiohttp.ClientSession, url: str, via: Route, size: int) -> bytes:
    async for attempt in AsyncRetrying(retry=retry_if_exception_type(_Transient), stop=stop_after_attempt(4),
                                       wait=wait_random_exponential(multiplier=0.5, max=8), reraise=True):  # fmt: skip
        with attempt:
            try:
                async with session.get(url, **request_kwargs(via)) as resp:
                    if resp.status in (429, 500, 502, 503, 504):
                        raise _Transient(f"HTTP {resp.status}")
                    if resp.status != 200:
                        raise DataPullError(f"{url}: HTTP {resp.status}")
                    try:
                        return await read_body(resp, size)  # the manifest's size: a larger body cannot match its hash
                    except BodyTooLarge as exc:
                        raise DataPullError(f"{url}: {exc}, the pinned file has {size:,}; not written") from None
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                raise _Transient(f"{type(exc).__name__}: {exc}") from None
    raise AssertionError("unreachable")  # pragma: no cover


async def pull(dest: Path, *, base_url: str = DEFAULT_BASE_URL, console: Console | None = None, concurrency: int = 8,
               ca_bundle: str | Path | None = None) -> int:  # fmt: skip
    """Download every manifest file into ``dest`` (AgentBench's data/ layout). Returns the file count.

    Honours HTTP(S)_PROXY/NO_PROXY and SSL_CERT_FILE like the model clients; ``ca_bundle`` adds CAs."""
    via = route(base_url, ca_bundle=ca_bundle, where="data pull --ca-bundle")
    files = manifest()
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataPullError(f"data pull --dest {dest}: cannot create the folder ({exc.strerror or exc}); give a folder you can write") from None
    sem = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=300, sock_connect=20)

    async def one(session: aiohttp.ClientSession, item: dict[str, Any]) -> None:
        target = dest / item["path"]
        if target.is_file() and _sha256(target) == item["sha256"]:
            return
        url = f"{base_url.rstrip('/')}/{item['commit']}/{item['repo_path']}"
        async with sem:
            try:
                body = await _fetch(session, url, via, item["size"])
            except _Transient as exc:
                raise DataPullError(f"{item['path']}: download failed after retries ({exc}); try again later") from None
        digest = hashlib.sha256(body).hexdigest()
        if digest != item["sha256"]:
            raise DataPullError(f"{item['path']}: sha256 {digest[:12]}… does not match the pinned {item['sha256'][:12]}… (from {url}); not written")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".part")
            tmp.write_bytes(body)
            os.replace(tmp, target)
        except OSError as exc:
            raise DataPullError(f"data pull --dest {dest}: cannot write {item['path']} ({exc.strerror or exc})") from None
        if console is not None:
            console.print(f"  {item['path']} ({len(body):,} bytes)")

    async with client_session(via, limit=concurrency, timeout=timeout) as session:
        await asyncio.gather(*(one(session, item) for item in files))
    return len(files)
