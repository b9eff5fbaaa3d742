"""Mind2Web page handling: parse a step's ``cleaned_html``, prune it around one round's candidates and
render it as the compact bracketed text the model sees (AgentBench v0.2's ``prune_tree`` +
``get_tree_repr(keep_html_brackets=True)``; docs/envs/mind2web.md, "Page rendering").

``cleaned_html`` is XML (Mind2Web's cleaned DOM: every element has a ``backend_node_id``, visible text
sits in ``<text>`` child elements), so it is parsed with the standard library's XML parser. Rendering
builds the serialisation an XML writer would produce (``<tag id="0" meta="...">``, ``<tag/>`` when empty,
text/tails escaped) and then applies upstream's clean-up of that string, so quirks such as quotes turning
into spaces or entities being decoded twice are the same as upstream's.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from xml.etree import ElementTree as ET

ID = "backend_node_id"
TEXT = "text"
MAX_DEPTH = 5  # descendants kept down to MAX_DEPTH + 1 levels below a candidate
MAX_CHILDREN = 50  # ... and at most this many of them (pre-order)
MAX_SIBLING = 3  # element siblings kept on each side of a candidate
MAX_VALUE_WORDS = 5  # words kept per attribute value
MAX_WORDS = 20  # words kept in the meta string and in each text node
CHOICE_WORDS = 10  # words of an element's own rendering shown as its choice text

# Attributes rendered into the meta string, in this order (Mind2Web's salient attributes, plus class).
META_ATTRIBUTES = (
    "role", "aria_role", "type", "alt", "aria_description", "aria_label", "label", "title", "name",
    "text_value", "value", "placeholder", "input_checked", "input_value", "option_selected", "class",
)  # fmt: skip
_UNINFORMATIVE = frozenset({"hidden", "none", "presentation", "null", "undefined"})
# Entities decoded after serialising, in this order (upstream's table, applied one after another).
_ENTITIES = (
    ("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">"), ("&nbsp;", " "), ("&ndash;", "-"),
    ("&rsquo;", "'"), ("&lsquo;", "'"), ("&ldquo;", '"'), ("&rdquo;", '"'), ("&#39;", "'"), ("&#40;", "("),
    ("&#41;", ")"),
)  # fmt: skip


# Stand-ins for the <text> tags while the serialisation is cleaned up (XML text cannot hold these characters).
_TEXT_OPEN, _TEXT_CLOSE = "\x02", "\x03"


class PageError(ValueError):
    """The step's page cannot be rendered (not XML, a candidate missing, an empty text node)."""


@dataclass(frozen=True)
class Round:
    """One rendered round: the page text and the choices (backend id, choice text) in document order."""

    page: str
    choices: tuple[tuple[str, str], ...]


def parse_page(html: str) -> ET.Element:
    try:
        return ET.fromstring(html)
    except ET.ParseError as exc:
        raise PageError(f"cleaned_html is not well-formed XML ({exc})") from None


def render_round(html: str | ET.Element, candidate_ids: Sequence[str]) -> Round:
    """Prune the page around ``candidate_ids`` and render it with its choices. A page already parsed
    (``parse_page``) is copied first (pruning works in place): a copy costs a third of a parse."""
    root = copy.deepcopy(html) if isinstance(html, ET.Element) else parse_page(html)
    _prune(root, list(candidate_ids))
    mapping: dict[str, int] = {}
    page = _repr(root, mapping)
    choices = tuple(
        (node.attrib[ID], " ".join(_repr(node, mapping).split()[:CHOICE_WORDS])) for node in root.iter() if ID in node.attrib
    )
    return Round(page=page, choices=choices)


def element_ids(html: str) -> set[str]:
    """Every ``backend_node_id`` on the page (for checking candidates against it)."""
    return {node.attrib[ID] for node in parse_page(html).iter() if ID in node.attrib}


# -- pruning -----------------------------------------------------------------------------------------


def _descendants(node: ET.Element, max_depth: int, depth: int = 0) -> list[ET.Element]:
    if depth > max_depth:
        return []
    out: list[ET.Element] = []
    for child in node:
        out.append(child)
        out.extend(_descendants(child, max_depth, depth + 1))
    return out


def _keep_set(root: ET.Element, parents: dict[ET.Element, ET.Element], candidate_ids: list[str]) -> set[str]:
    by_id: dict[str, ET.Element] = {}
    for node in root.iter():
        by_id.setdefault(node.attrib.get(ID, ""), node)  # the first element with an id, as an XPath lookup
    keep: set[str] = set()
    for cid in candidate_ids:
        node = by_id.get(cid)
        if node is None or cid == "":
            raise PageError(f"candidate {cid!r} is not on the page")
        keep.add(cid)
        ancestor = parents.get(node)
        while ancestor is not None:
            keep.add(ancestor.attrib.get(ID, ""))  # an id-less element adds "" (then all id-less ones stay)
            ancestor = parents.get(ancestor)
        keep.update([d.attrib.get(ID, "") for d in _descendants(node, MAX_DEPTH)][:MAX_CHILDREN])
        parent = parents.get(node)
        if parent is not None:
            siblings = [x for x in parent if x.tag != TEXT]
            if node not in siblings:
                raise PageError(f"candidate {cid!r} is a <text> node, which cannot be a choice")
            i = siblings.index(node)
            keep.update(x.attrib.get(ID, "") for x in siblings[max(0, i - MAX_SIBLING) : i + MAX_SIBLING + 1])
    return keep


def _prune(root: ET.Element, candidate_ids: list[str]) -> None:
    """Drop what is not near a candidate, strip ids of non-candidates, unwrap empty wrappers (in place)."""
    parents = {child: parent for parent in root.iter() for child in parent}
    keep = _keep_set(root, parents, candidate_ids)
    candidates = set(candidate_ids)
    # Reverse document order: every node is handled after its descendants, before its ancestors, so
    # ``parents`` is still right for it (only already-handled nodes ever move).
    for node in reversed(list(root.iter())):
        parent = parents.get(node)
        if node.tag != TEXT:
            node_id = node.attrib.get(ID, "")
            is_keep, is_candidate = node_id in keep, node_id in candidates
        else:
            if parent is None:
                raise PageError("the page's root is a <text> node")
            parent_id = parent.attrib.get(ID, "")
            is_keep, is_candidate = parent_id in keep, parent_id in candidates
        if not is_keep and parent is not None:
            parent.remove(node)
            continue
        if not is_candidate or node.tag == TEXT:
            node.attrib.pop(ID, None)
        if (
            parent is not None
            and node.tag != TEXT
            and not node.attrib
            and len(node) <= 1
            and not any(child.tag == TEXT for child in node)
        ):
            index = list(parent).index(node)
            parent[index : index + 1] = list(node)  # the child moves up; the wrapper's text and tail go


# -- rendering ---------------------------------------------------------------------------------------


def _meta(attrib: dict[str, str]) -> str:
    seen: set[str] = set()
    parts: list[str] = []
    for name in META_ATTRIBUTES:
        if name not in attrib:
            continue
        value = attrib[name].lower()
        if value in _UNINFORMATIVE or value.startswith("http"):
            continue
        value = " ".join([w for w in value.split() if len(w) < 15][:MAX_VALUE_WORDS])
        if value and value not in seen:
            seen.add(value)
            parts.append(value)
    return " ".join(" ".join(parts).split()[:MAX_WORDS])


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def _escape_attr(value: str) -> str:
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    return value.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")


def _serialise(node: ET.Element, mapping: dict[str, int], out: list[str]) -> None:
    if node.tag == TEXT:
        if node.text is None:
            raise PageError("an empty <text/> node cannot be rendered")
        attrs = list(node.attrib.items())
        text = " ".join(node.text.split()[:MAX_WORDS])
    else:
        attrs = []
        if ID in node.attrib:
            attrs.append(("id", str(mapping.setdefault(node.attrib[ID], len(mapping)))))
        meta = _meta(node.attrib)
        if meta:
            attrs.append(("meta", meta))
        text = node.text or ""
    if node.tag == TEXT and not attrs:  # <text>…</text> is unwrapped after the clean-up: mark it for now
        out.append(_TEXT_OPEN)
    else:
        out.append(f"<{node.tag}" + "".join(f' {k}="{_escape_attr(v)}"' for k, v in attrs))
        if not text and not len(node):
            out.append("/>")
            return
        out.append(">")
    out.append(_escape_text(text))
    for child in node:
        _serialise(child, mapping, out)
        if child.tail:
            out.append(_escape_text(child.tail))
    out.append(_TEXT_CLOSE if node.tag == TEXT and not attrs else f"</{node.tag}>")


def _repr(node: ET.Element, mapping: dict[str, int]) -> str:
    out: list[str] = []
    _serialise(node, mapping, out)
    if node.tail:  # an element's serialisation includes its tail text
        out.append(_escape_text(node.tail))
    text = "".join(out).replace('"', " ")
    text = text.replace("meta= ", "").replace("id= ", "id=").replace(" >", ">")
    text = text.replace(_TEXT_OPEN, "").replace(_TEXT_CLOSE, "")
    for entity, char in _ENTITIES:
        text = text.replace(entity, char)
    return " ".join(text.split())
