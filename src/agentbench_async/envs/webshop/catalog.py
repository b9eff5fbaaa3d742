"""WebShop's data files -> products and goals (``web_agent_site/engine/engine.py`` and ``goal.py`` upstream).

Three files in WebShop's own formats (the built-in suite ships files in the same formats):

* ``items_shuffle.json`` — JSON array of products (``asin``, ``name``, ``full_description``,
  ``small_description``, ``pricing``, ``customization_options``, ``category``, ``query``,
  ``product_category``; other keys ignored). Optional extension of this project: ``title_nouns``, the
  nouns of ``name`` for the reward's title score (upstream tags them with spaCy at reward time).
* ``items_ins_v2.json`` — object asin -> ``{"attributes": [...], ...}``: the product's attributes.
* ``items_human_ins.json`` — object asin -> list of ``{"instruction", "instruction_attributes",
  "instruction_options", ...}``: the human goals.

Goals are built as upstream: products in file order, their instructions in order, those without
attributes skipped; each gets a price bound drawn from the target's sampled price; then the list is
shuffled with ``random.seed(233)``. The goal index (AgentBench's sample index) is the position after the
shuffle. Prices are drawn from a seeded generator (upstream used the unseeded global one, so its price
bounds changed from run to run); the shuffle is upstream's exactly.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ...environment import TaskFileError
from .jsonstream import iter_array, iter_object

PRODUCTS_FILE = "items_shuffle.json"
ATTRIBUTES_FILE = "items_ins_v2.json"
GOALS_FILE = "items_human_ins.json"
# WebShop's defaults when the full download is absent: the 1,000-product subsets.
SMALL_FILES = {PRODUCTS_FILE: "items_shuffle_1000.json", ATTRIBUTES_FILE: "items_ins_v2_1000.json"}

PRICE_RANGE = [10.0 * i for i in range(1, 100)]  # candidate price bounds: 10, 20, ..., 990
NO_PRICE_BOUND = 1_000_000
SHUFFLE_SEED = 233  # upstream: random.seed(233); random.shuffle(goals)
DEFAULT_PRICE_SEED = 0
DUMMY_ATTR = "DUMMY_ATTR"
_NOT_PRICE = re.compile(r"[^\d.]")


@dataclass(slots=True)
class Product:
    asin: str
    title: str
    description: str
    bullets: tuple[str, ...]
    pricing: tuple[float, ...]
    price_tag: str  # "$39.99" or "$24.5 to $59.0"
    price: float  # the sampled price the reward uses
    options: dict[str, tuple[str, ...]]  # group (lower-case) -> values (lower-case, "/" -> " | ")
    category: str
    query: str
    product_category: str
    attributes: tuple[str, ...]
    title_nouns: tuple[str, ...] | None  # None: tag the title when the reward needs it


@dataclass(frozen=True, slots=True)
class Goal:
    asin: str
    category: str
    query: str
    name: str
    product_category: str
    instruction_text: str
    attributes: tuple[str, ...]
    price_upper: float
    goal_options: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "asin": self.asin,
            "category": self.category,
            "query": self.query,
            "name": self.name,
            "product_category": self.product_category,
            "instruction_text": self.instruction_text,
            "attributes": list(self.attributes),
            "price_upper": self.price_upper,
            "goal_options": list(self.goal_options),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Goal:
        return cls(
            asin=data["asin"],
            category=data["category"],
            query=data["query"],
            name=data["name"],
            product_category=data["product_category"],
            instruction_text=data["instruction_text"],
            attributes=tuple(data["attributes"]),
            price_upper=float(data["price_upper"]),
            goal_options=tuple(data["goal_options"]),
        )


@dataclass
class Catalog:
    products: list[Product]
    index: dict[str, int]  # asin -> position in products
    goals: list[Goal]
    folder: Path

    def product(self, asin: str) -> Product:
        return self.products[self.index[asin]]


def data_files(folder: Path) -> dict[str, Path]:
    """The three files in ``folder`` (the full names, else WebShop's ``_1000`` subsets)."""
    if not folder.is_dir():
        raise TaskFileError(f"webshop: data folder {folder} does not exist (it must hold {PRODUCTS_FILE}, {ATTRIBUTES_FILE}, {GOALS_FILE})")
    found: dict[str, Path] = {}
    for name in (PRODUCTS_FILE, ATTRIBUTES_FILE, GOALS_FILE):
        path = folder / name
        if not path.is_file() and name in SMALL_FILES and (folder / SMALL_FILES[name]).is_file():
            path = folder / SMALL_FILES[name]
        if not path.is_file():
            raise TaskFileError(f"webshop: {folder} has no {name}; the WebShop data folder needs {PRODUCTS_FILE}, {ATTRIBUTES_FILE} and {GOALS_FILE}")
        found[name] = path
    return found


# --------------------------------------------------------------------------------------------- products


def _text(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TaskFileError(f"{where}: '{key}' must be a string, got {type(value).__name__}")
    return value


def parse_pricing(pricing: Any, where: str) -> tuple[tuple[float, ...], str]:
    """Upstream's parse: split on '$', drop the first piece, keep digits and '.', at most two prices."""
    if not pricing:
        return (100.0,), "$100.0"
    if not isinstance(pricing, str):
        raise TaskFileError(f"{where}: 'pricing' must be a string like \"$12.99\" or \"$12.99 - $19.99\"")
    try:
        prices = [float(Decimal(_NOT_PRICE.sub("", piece))) for piece in pricing.split("$")[1:]]
    except InvalidOperation:
        raise TaskFileError(f"{where}: cannot read the price {pricing!r} (expected \"$12.99\" or \"$12.99 - $19.99\")") from None
    if not prices:
        raise TaskFileError(f"{where}: 'pricing' {pricing!r} has no '$' amount")
    if len(prices) == 1:
        return (prices[0],), f"${prices[0]}"
    return (prices[0], prices[1]), f"${prices[0]} to ${prices[1]}"


def _options(raw: Any, where: str) -> dict[str, tuple[str, ...]]:
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise TaskFileError(f"{where}: 'customization_options' must be an object of option lists")
    options: dict[str, tuple[str, ...]] = {}
    for name, contents in raw.items():
        if contents is None:
            continue
        if not isinstance(contents, list) or not all(isinstance(c, dict) and isinstance(c.get("value"), str) for c in contents):
            raise TaskFileError(f"{where}: customization option {name!r} must be a list of {{\"value\": ...}} objects")
        options[str(name).lower()] = tuple(c["value"].strip().replace("/", " | ").lower() for c in contents)
    return options


def _bullets(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list) and all(isinstance(b, str) for b in raw):
        return tuple(raw)
    raise TaskFileError(f"{where}: 'small_description' must be a string or a list of strings")


def _product(raw: Any, where: str, attributes: dict[str, tuple[str, ...]]) -> Product | None:
    if not isinstance(raw, dict):
        raise TaskFileError(f"{where}: not a JSON object")
    asin = raw.get("asin")
    if not isinstance(asin, str):
        raise TaskFileError(f"{where}: 'asin' must be a string")
    if asin == "nan" or len(asin) > 10:
        return None  # skipped upstream
    where = f"{where} (asin {asin})"
    pricing, price_tag = parse_pricing(raw.get("pricing"), where)
    nouns = raw.get("title_nouns")
    if nouns is not None and not (isinstance(nouns, list) and all(isinstance(n, str) for n in nouns)):
        raise TaskFileError(f"{where}: 'title_nouns' must be a list of strings")
    return Product(
        asin=asin,
        title=_text(raw, "name", where),
        description=_text(raw, "full_description", where),
        bullets=_bullets(raw.get("small_description"), where),
        pricing=pricing,
        price_tag=price_tag,
        price=pricing[0],
        options=_options(raw.get("customization_options"), where),
        category=_text(raw, "category", where),
        query=_text(raw, "query", where).lower().strip(),
        product_category=_text(raw, "product_category", where),
        attributes=attributes.get(asin, (DUMMY_ATTR,)),
        title_nouns=tuple(n.lower() for n in nouns) if nouns is not None else None,
    )


def _attributes(path: Path) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for asin, record in iter_object(path):
        if isinstance(record, dict) and "attributes" in record:
            attrs = record["attributes"]
            if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
                raise TaskFileError(f"{path}: {asin}: 'attributes' must be a list of strings")
            out[asin] = tuple(attrs)
    return out


# --------------------------------------------------------------------------------------------- goals


def _instructions(path: Path, wanted: dict[str, int]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for asin, records in iter_object(path):
        if asin not in wanted:
            continue
        if not isinstance(records, list):
            raise TaskFileError(f"{path}: {asin}: expected a list of instruction records")
        for i, record in enumerate(records):
            where = f"{path}: {asin}[{i}]"
            if not isinstance(record, dict) or not isinstance(record.get("instruction"), str):
                raise TaskFileError(f"{where}: each record needs a string 'instruction'")
            for key in ("instruction_attributes", "instruction_options"):
                value = record.get(key, [])
                if isinstance(value, dict):  # synthetic-goal style: option group -> value
                    value = list(value.values())
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise TaskFileError(f"{where}: '{key}' must be a list of strings")
        out[asin] = records
    return out


def _goals(products: list[Product], instructions: dict[str, list[dict[str, Any]]], rng: random.Random) -> list[Goal]:
    goals: list[Goal] = []
    for product in products:
        for record in instructions.get(product.asin, ()):
            attributes = record.get("instruction_attributes") or []
            if not attributes:
                continue
            candidates = [p for p in PRICE_RANGE if p > product.price][:4]
            if len(candidates) >= 2:
                _, price_upper = sorted(rng.sample(candidates, 2))
                clause = f", and price lower than {price_upper:.2f} dollars"
            else:
                price_upper, clause = float(NO_PRICE_BOUND), ""
            options = record.get("instruction_options") or []
            if isinstance(options, dict):
                options = list(options.values())
            goals.append(
                Goal(
                    asin=product.asin,
                    category=product.category,
                    query=product.query,
                    name=product.title,
                    product_category=product.product_category,
                    instruction_text=record["instruction"].strip(".") + clause,
                    attributes=tuple(attributes),
                    price_upper=price_upper,
                    goal_options=tuple(options),
                )
            )
    random.Random(SHUFFLE_SEED).shuffle(goals)
    return goals


def load_catalog(folder: Path, *, price_seed: int = DEFAULT_PRICE_SEED) -> Catalog:
    """Load products, their attributes and the human goals from a WebShop data folder."""
    files = data_files(folder)
    attributes = _attributes(files[ATTRIBUTES_FILE])
    products: list[Product] = []
    index: dict[str, int] = {}
    for i, raw in enumerate(iter_array(files[PRODUCTS_FILE])):
        product = _product(raw, f"{files[PRODUCTS_FILE]}: product {i}", attributes)
        if product is None or product.asin in index:
            continue  # skipped, or a duplicate ASIN (the first one wins)
        index[product.asin] = len(products)
        products.append(product)
    del attributes
    rng = random.Random(price_seed)
    for product in products:
        if len(product.pricing) == 2:
            product.price = rng.uniform(*product.pricing)
    instructions = _instructions(files[GOALS_FILE], index)
    return Catalog(products=products, index=index, goals=_goals(products, instructions, rng), folder=folder)
