"""How long a request waited in the server's own queue, where the server says so.

Part of a call's ``latency_ms`` can be time the request spent queued in the server behind others (a local server with
few slots under many episodes). Two servers say how long:

* text-generation-inference's router answers every non-streamed ``/v1/chat/completions`` with an ``x-queue-time``
  header: whole milliseconds from the request entering its queue to its batch starting (``router/src/server.rs``,
  ``generate_internal``: ``queue_time = response.start - response.queued``, written ``as_millis()``; read at commit
  003eaec0fbe00aacf03547b317163363cef56ab9).
* llama.cpp's server adds ``timings`` to a chat completion (``tools/server/server-task.cpp``,
  ``to_json_oaicompat_chat``: ``prompt_ms`` and ``predicted_ms``, the milliseconds it spent on the prompt and on
  generating; read at commit 00efb3e184262872916bf136b3df63c1822a19bd). It does not report the wait for a free slot:
  the rest of the call's latency is (on loopback, the transfer being milliseconds).

Other servers (vLLM, the hosted APIs) say nothing per request: ``server_queue_ms`` stays NULL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TGI_QUEUE_HEADER = "x-queue-time"


def header_queue_ms(headers: Mapping[str, str] | None) -> float | None:
    """The ``x-queue-time`` header (text-generation-inference: whole milliseconds), or None."""
    raw = headers.get(TGI_QUEUE_HEADER) if headers is not None else None
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 else None


def timings_queue_ms(body: Any, latency_ms: float) -> float | None:
    """llama.cpp: the call's latency less the prompt and generation time its ``timings`` report, or None."""
    timings = body.get("timings") if isinstance(body, dict) else None
    if not isinstance(timings, dict):
        return None
    worked = [timings.get(k) for k in ("prompt_ms", "predicted_ms")]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in worked):
        return None
    return max(0.0, latency_ms - float(worked[0]) - float(worked[1]))  # type: ignore[arg-type]
