"""Drive Debian's headless Chromium through the DevTools protocol (a websocket, spoken with aiohttp).

No WebDriver and no new dependency: Chromium's own ``--remote-debugging-port`` and aiohttp's websocket
client are enough to load pages, click with real mouse events, read the DOM and take screenshots.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--window-size=1280,900")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium with one tab: ``async with Browser(profile_dir) as b: await b.goto(url)``."""

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self._proc: subprocess.Popen[bytes] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self.console_errors: list[str] = []

    async def __aenter__(self) -> Browser:
        binary = chromium()
        assert binary is not None
        self._proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0", "about:blank"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        endpoint = await asyncio.wait_for(asyncio.to_thread(self._devtools_url), 60)
        port = re.search(r":(\d+)/", endpoint).group(1)  # type: ignore[union-attr]
        self._session = aiohttp.ClientSession()
        for _ in range(100):
            async with self._session.get(f"http://127.0.0.1:{port}/json/list") as resp:
                targets = [t for t in await resp.json() if t.get("type") == "page"]
            if targets:
                break
            await asyncio.sleep(0.1)
        self._ws = await self._session.ws_connect(targets[0]["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        for domain in ("Page", "Runtime", "Log"):
            await self.send(f"{domain}.enable")
        return self

    def _devtools_url(self) -> str:
        assert self._proc is not None and self._proc.stderr is not None
        for raw in self._proc.stderr:
            line = raw.decode(errors="replace")
            if "DevTools listening on" in line:
                return line.split("DevTools listening on", 1)[1].strip()
        raise RuntimeError("chromium exited without opening its DevTools port")

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    async def _read(self) -> None:
        assert self._ws is not None
        async for msg in self._ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            elif data.get("method") == "Runtime.exceptionThrown":
                self.console_errors.append(json.dumps(data["params"]["exceptionDetails"])[:500])
            elif data.get("method") == "Log.entryAdded" and data["params"]["entry"]["level"] == "error":
                self.console_errors.append(data["params"]["entry"].get("text", "")[:500])
            else:
                self._events.put_nowait(data)

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self._ws is not None
        msg_id = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        await self._ws.send_str(json.dumps({"id": msg_id, "method": method, "params": params or {}}))
        reply = await asyncio.wait_for(fut, 60)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})  # type: ignore[no-any-return]

    async def _loaded(self) -> None:
        while True:
            event = await asyncio.wait_for(self._events.get(), 60)
            if event.get("method") == "Page.loadEventFired":
                return

    def _drain(self) -> None:
        while not self._events.empty():
            self._events.get_nowait()

    async def goto(self, url: str) -> None:
        self._drain()
        await self.send("Page.navigate", {"url": url})
        await self._loaded()

    async def js(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def click(self, selector: str) -> None:
        """Scroll ``selector`` into view and click its middle with real mouse events; wait for the next page."""
        box = await self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null; "
                            "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
                            "return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        assert box is not None, f"nothing matches {selector}"
        self._drain()
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1})
        await self._loaded()

    async def text(self) -> str:
        return str(await self.js("document.body.innerText"))

    async def screenshot(self, path: Path, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = await self.js("[document.documentElement.scrollWidth, Math.min(document.documentElement.scrollHeight, 6000)]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
            params["captureBeyondViewport"] = True
        data = await self.send("Page.captureScreenshot", params)
        path.write_bytes(base64.b64decode(data["data"]))
        return path
