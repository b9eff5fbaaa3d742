"""Loading Mind2Web-format task folders into step samples (AgentBench v0.2's ``get_data_split`` +
``Mind2Web.get_data``).

A folder holds ``data_dev/*.json`` and ``data_std/*.json`` (JSON arrays of Mind2Web task objects) and the
candidate-ranking file ``scores_all_data.pkl`` (or the same structure as ``scores_all_data.json``):
``{"scores": {sid: {backend_node_id: float}}, "ranks": {sid: {backend_node_id: int}}}`` with
``sid = "<annotation_id>_<action_uid>"``. The official download (``--mind2web-data DIR``) and the built-in
suite (``environments/mind2web/``) share this layout and this loader.

Every step of every task becomes one sample (files in name order, tasks in file order, steps in order),
with the gold history as its previous actions. The pickle is read with an unpickler that builds only
plain containers, numbers and strings (numpy scalars are decoded by hand, numpy is never imported); any
other class in the file is refused.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
from pathlib import Path
from typing import Any

from ...environment import TaskFileError, read_json
from .protocol import TOP_K, shown_ids

SPLIT_DIRS = {"dev": "data_dev", "test": "data_std"}
SCORE_FILES = ("scores_all_data.pkl", "scores_all_data.json")


# -- the ranking file ----------------------------------------------------------------------------------


class _DType:
    """Stands in for ``numpy.dtype`` while unpickling a numpy scalar: remembers the type code and byte order."""

    def __init__(self, code: str, align: bool = False, copy: bool = False) -> None:
        self.code = code
        self.order = "<"

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        if len(state) > 1 and state[1] in ("<", ">"):
            self.order = state[1]


_STRUCT_CODES = {"f2": "e", "f4": "f", "f8": "d", "i1": "b", "i2": "h", "i4": "i", "i8": "q",
                 "u1": "B", "u2": "H", "u4": "I", "u8": "Q", "b1": "?"}  # fmt: skip


def _numpy_scalar(dtype: _DType, data: bytes | str = b"") -> float | int | bool:
    code = _STRUCT_CODES.get(dtype.code)
    if code is None or not isinstance(dtype, _DType):
        raise pickle.UnpicklingError(f"numpy scalar of type {dtype.code!r} is not a number this loader reads")
    if isinstance(data, str):  # protocol 0/2 pickles written by Python 2 carry latin-1 text
        data = data.encode("latin-1")
    value: float | int | bool = struct.unpack(dtype.order + code, data)[0]
    return value


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for bytes (latin-1 only)."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise pickle.UnpicklingError(f"refusing _codecs.encode with encoding {encoding!r}")
    return text.encode("latin-1")


_ALLOWED_GLOBALS = {
    ("_codecs", "encode"): _latin1_bytes,
    ("numpy.core.multiarray", "scalar"): _numpy_scalar,
    ("numpy._core.multiarray", "scalar"): _numpy_scalar,
    ("numpy", "dtype"): _DType,
}


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        allowed = _ALLOWED_GLOBALS.get((module, name))
        if allowed is None:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} (only dicts, lists, numbers and strings are read)")
        return allowed


def load_scores(path: Path) -> dict[str, Any]:
    """The ranking file as plain dicts; a pickle holding anything but plain data is refused."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TaskFileError(f"{path}: cannot read the candidate-ranking file ({exc.strerror})") from None
    try:
        if path.suffix == ".json":
            scores = json.loads(raw)
        else:
            scores = _PlainUnpickler(io.BytesIO(raw)).load()
    except (pickle.UnpicklingError, ValueError, EOFError, struct.error, TypeError, AttributeError, IndexError) as exc:
        raise TaskFileError(f"{path}: not a readable candidate-ranking file ({exc})") from None
    if not isinstance(scores, dict) or not isinstance(scores.get("scores"), dict) or not isinstance(scores.get("ranks"), dict):
        raise TaskFileError(f"{path}: must hold a dict with 'scores' and 'ranks' (sid -> backend_node_id -> value)")
    return scores


# -- task files ------------------------------------------------------------------------------------------


def _require(cond: bool, where: str, message: str) -> None:
    if not cond:
        raise TaskFileError(f"{where}: {message}")


def _candidates(raw: Any, where: str, key: str, ranks: dict[str, Any], scores: dict[str, Any], sid: str) -> list[dict[str, Any]]:
    _require(isinstance(raw, list), where, f"'{key}' must be a list of candidate objects")
    out: list[dict[str, Any]] = []
    for i, cand in enumerate(raw):
        _require(isinstance(cand, dict) and isinstance(cand.get("backend_node_id"), str), where,
                 f"{key}[{i}] needs a string 'backend_node_id'")  # fmt: skip
        node_id = cand["backend_node_id"]
        _require(node_id in ranks and node_id in scores, where,
                 f"candidate {node_id!r} has no entry under {sid!r} in the candidate-ranking file")  # fmt: skip
        rank = ranks[node_id]
        _require(isinstance(rank, int) and not isinstance(rank, bool), where, f"rank of candidate {node_id!r} must be an integer")
        out.append({"backend_node_id": node_id, "rank": rank, "score": float(scores[node_id])})
    return out


def _samples_of_task(task: Any, where: str, ranking: dict[str, Any]) -> list[dict[str, Any]]:
    _require(isinstance(task, dict), where, "not a JSON object")
    for key in ("annotation_id", "confirmed_task"):
        _require(isinstance(task.get(key), str) and task[key] != "", where, f"'{key}' must be a non-empty string")
    where = f"{where} (annotation_id {task['annotation_id']})"
    actions, reprs = task.get("actions"), task.get("action_reprs")
    _require(isinstance(actions, list) and len(actions) > 0, where, "'actions' must be a non-empty list of steps")
    _require(isinstance(reprs, list) and len(reprs) == len(actions) and all(isinstance(r, str) for r in reprs), where,
             "'action_reprs' must be a list of strings, one per action")  # fmt: skip
    samples = []
    for k, step in enumerate(actions):
        at = f"{where} action {k}"
        _require(isinstance(step, dict) and isinstance(step.get("action_uid"), str), at, "needs a string 'action_uid'")
        sid = f"{task['annotation_id']}_{step['action_uid']}"
        _require(isinstance(step.get("cleaned_html"), str) and step["cleaned_html"] != "", at, "'cleaned_html' must be a non-empty string")
        operation = step.get("operation")
        _require(isinstance(operation, dict) and isinstance(operation.get("op"), str), at, "'operation' must be an object with 'op'")
        value = operation.get("value", "")
        _require(isinstance(value, str), at, "'operation.value' must be a string")
        ranks, scores = ranking["ranks"].get(sid), ranking["scores"].get(sid)
        _require(isinstance(ranks, dict) and isinstance(scores, dict), at, f"no entry {sid!r} in the candidate-ranking file")
        assert isinstance(ranks, dict) and isinstance(scores, dict)
        pos = _candidates(step.get("pos_candidates"), at, "pos_candidates", ranks, scores, sid)
        neg = _candidates(step.get("neg_candidates"), at, "neg_candidates", ranks, scores, sid)
        pos_ids = shown_ids(pos)
        target = {"element": pos_ids} if pos_ids else None  # the action is rendered per episode (protocol.gold_action)
        samples.append({
            "sid": sid,
            "annotation_id": task["annotation_id"],
            "action_uid": step["action_uid"],
            "step": k,
            "website": str(task.get("website", "")),
            "confirmed_task": task["confirmed_task"],
            "previous_actions": list(reprs[:k]),
            "operation": {"op": operation["op"], "value": value},
            "pos_candidates": pos,
            "neg_candidates": neg,
            "target": target,
            "cleaned_html": step["cleaned_html"],
        })  # fmt: skip
    return samples


def split_files(folder: Path, split: str) -> list[Path]:
    if split not in SPLIT_DIRS:
        raise TaskFileError(f"mind2web: unknown split {split!r} (use dev or test)")
    sub = folder / SPLIT_DIRS[split]
    files = sorted(sub.glob("*.json")) if sub.is_dir() else []
    if not files:
        raise TaskFileError(f"{sub}: no *.json task files; the Mind2Web data folder needs {SPLIT_DIRS[split]}/*.json")
    return files


def score_file(folder: Path) -> Path:
    for name in SCORE_FILES:
        if (folder / name).is_file():
            return folder / name
    raise TaskFileError(f"{folder}: no candidate-ranking file ({' or '.join(SCORE_FILES)})")


def load_samples(folder: Path, split: str, ranking: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """All step samples of a split, each with its ``index`` (position in the flattened list) and ``target``."""
    files = split_files(folder, split)
    ranking = ranking if ranking is not None else load_scores(score_file(folder))
    samples: list[dict[str, Any]] = []
    seen: set[str] = set()
    for path in files:
        tasks = read_json(path, missing=f"{path}: cannot read (No such file or directory)")
        if not isinstance(tasks, list):
            raise TaskFileError(f"{path}: must be a JSON array of Mind2Web task objects")
        for i, task in enumerate(tasks):
            for sample in _samples_of_task(task, f"{path}: task {i}", ranking):
                if sample["sid"] in seen:
                    raise TaskFileError(f"{path}: task {i}: step id {sample['sid']!r} occurs twice (annotation_id + action_uid must be unique)")
                seen.add(sample["sid"])
                sample["index"] = len(samples)
                samples.append(sample)
    return samples


__all__ = ["SPLIT_DIRS", "TOP_K", "load_samples", "load_scores", "score_file", "split_files"]
