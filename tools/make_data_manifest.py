"""Regenerate src/agentbench_async/data_manifest.json (paths and sha256 of the official AgentBench data
files, and of upstream's prompt sources and task configs under upstream-prompts/) from a local copy laid out
like AgentBench's data/ folder (e.g. ../shared/agentbench-data).

    python tools/make_data_manifest.py ../shared/agentbench-data

Only names and hashes are written; the data itself is never copied into the project.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

V02 = "41e6807349f741e06428fae3e9e4d334e7002362"  # branch v0.2: the ICLR-2024 layout
FC = "578c5e9f706fc2dd96188ca6c8cf9095ca0c6528"  # branch main: AgentBench FC
OUT = Path(__file__).resolve().parents[1] / "src" / "agentbench_async" / "data_manifest.json"


def _source(rel: str) -> tuple[str, str]:
    """(commit, path in the AgentBench repository) of a file at ``rel`` in the data folder."""
    parts = rel.split("/")
    if rel == "LICENSE":
        return V02, "LICENSE"
    if parts[0] == "upstream-prompts":  # upstream-prompts/<v0.2|fc>/<path in the repository>: the prompt sources
        return {"v0.2": V02, "fc": FC}[parts[1]], "/".join(parts[2:])
    folder, rest = parts[0], "/".join(parts[1:])
    if rest.startswith("agentbench-fc/"):
        inner = rest.removeprefix("agentbench-fc/")
        if folder == "alfworld" and inner.startswith("prompts/"):
            return FC, f"src/server/tasks/alfworld/{inner}"
        return FC, f"data/{folder}/{inner}"
    if folder == "knowledgegraph" and rest.startswith("ontology/"):
        return V02, f"src/server/tasks/knowledgegraph/{rest}"
    if folder == "alfworld" and rest.startswith("prompts/"):
        return V02, f"src/server/tasks/alfworld/{rest}"
    return V02, f"data/{folder}/{rest}"


def build(root: Path) -> list[dict[str, str]]:
    files = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or path.name == "README.md" or rel.endswith(".derived.jsonl"):
            continue
        commit, repo_path = _source(rel)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        files.append({"path": rel, "commit": commit, "repo_path": repo_path, "sha256": digest, "size": path.stat().st_size})
    return files


if __name__ == "__main__":
    root = Path(sys.argv[1])
    manifest = {"repository": "THUDM/AgentBench", "files": build(root)}
    OUT.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(manifest['files'])} files -> {OUT}")
