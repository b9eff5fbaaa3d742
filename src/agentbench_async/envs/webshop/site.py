"""The shop the agent browses: pages, their text, their buttons, and what an action does (WebShop's text env).

One ``Shop`` per environment holds the catalog and the search index (shared by every episode); one
``Browser`` per episode holds only where the agent is: the page, the search hits, the page number, the
product and the chosen options (a few hundred bytes).

Text observation = the page's visible text segments joined with ``" [SEP] "``; the available actions are
``{'has_search_bar': bool, 'clickables': [...]}`` (button texts lower-cased, in page order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .catalog import Catalog, Goal, Product
from .nouns import NounFn
from .reward import Purchase, Wanted, reward
from .search import SearchIndex, document_text

PAGE_SIZE = 10  # products per results page
SEP = " [SEP] "

SEARCH, RESULTS, ITEM = "search", "results", "item"
SUB_PAGES = ("description", "features", "reviews")  # "attributes" exists upstream but its button is hidden

BACK_TO_SEARCH, NEXT, PREV, BUY_NOW = "back to search", "next >", "< prev", "buy now"
_ACTION = re.compile(r"(.+)\[(.+)\]")  # upstream parse_action (re.match, greedy)

Target = tuple[Any, ...]  # what a clickable does: ("back",), ("next",), ("asin", i), ("option", group, value), ...


class Shop:
    """The catalog, its search index and the noun tagger: built once, read by every episode."""

    def __init__(self, catalog: Catalog, nouns: NounFn, nouns_source: str) -> None:
        self.catalog = catalog
        self.products = catalog.products
        self.nouns = nouns
        self.nouns_source = nouns_source
        self.index = SearchIndex((p.asin, document_text(p.title, p.description, p.bullets, p.options)) for p in self.products)

    def search(self, keywords: str) -> list[int]:
        return self.index.search(keywords)

    def title_nouns(self, product: Product) -> tuple[str, ...]:
        return product.title_nouns if product.title_nouns is not None else self.nouns(product.title)

    def goal_nouns(self, goal: Goal) -> tuple[str, ...]:
        target = self.catalog.index.get(goal.asin)
        if target is not None and self.products[target].title == goal.name:
            return self.title_nouns(self.products[target])
        return self.nouns(goal.name)

    def reward(self, product: Product, goal: Goal, options: dict[str, str]) -> tuple[float, dict[str, Any]]:
        purchase = Purchase(
            query=product.query,
            product_category=product.product_category,
            nouns=self.title_nouns(product),
            attributes=product.attributes,
            title=product.title,
            bullets=product.bullets,
            description=product.description,
            price=product.price,
            options=options,
        )
        wanted = Wanted(
            query=goal.query,
            product_category=goal.product_category,
            nouns=self.goal_nouns(goal),
            attributes=goal.attributes,
            options=goal.goal_options,
            price_upper=goal.price_upper,
        )
        return reward(purchase, wanted)


@dataclass(slots=True)
class Browser:
    """One episode's place in the shop."""

    shop: Shop
    goal: Goal
    page: str = SEARCH
    keywords: str = ""
    hits: list[int] = field(default_factory=list)
    page_no: int = 1
    product: int | None = None
    options: dict[str, str] = field(default_factory=dict)

    # -------------------------------------------------------------------------------------- rendering

    def _view(self) -> tuple[list[str], dict[str, Target]]:
        """The page's text segments and its clickables (text -> target; a repeated text: the last wins)."""
        head = ["Instruction:", self.goal.instruction_text]
        clicks: dict[str, Target] = {}
        if self.page == SEARCH:
            return ["WebShop", *head, "Search"], {"search": ("search",)}
        segments = [*head, "Back to Search"]
        clicks[BACK_TO_SEARCH] = ("back",)
        if self.page == RESULTS:
            segments.append(f"Page {self.page_no} (Total results: {len(self.hits)})")
            if self.page_no > 1:
                segments.append("< Prev")
                clicks[PREV] = ("prev",)
            segments.append("Next >")
            clicks[NEXT] = ("next",)
            start = (self.page_no - 1) * PAGE_SIZE
            for i in self.hits[start : start + PAGE_SIZE]:
                product = self.shop.products[i]
                segments += [product.asin, product.title, product.price_tag]
                clicks[product.asin.lower()] = ("asin", i)
            return _nonempty(segments), clicks
        assert self.product is not None
        product = self.shop.products[self.product]
        segments.append("< Prev")
        clicks[PREV] = ("prev",)
        if self.page == ITEM:
            for group, values in product.options.items():
                segments += [group, *values]
            segments += [product.title, f"Price: {product.price_tag}", "Rating: N.A.", "Description", "Features", "Reviews", "Buy Now"]
            for name in SUB_PAGES:
                clicks[name] = ("sub", name)
            clicks[BUY_NOW] = ("buy",)
            for group, values in product.options.items():
                for value in values:
                    clicks[value] = ("option", group, value)
        elif self.page == "description":
            segments.append(product.description.strip())
        elif self.page == "features":
            segments += [b.strip() for b in product.bullets]
        # reviews: WebShop never loads reviews, the page lists none
        return _nonempty(segments), clicks

    def observation(self) -> str:
        return SEP.join(self._view()[0])

    def available_actions(self) -> dict[str, Any]:
        return {"has_search_bar": self.page == SEARCH, "clickables": list(self._view()[1])}

    # -------------------------------------------------------------------------------------- actions

    @staticmethod
    def searches(action: str) -> bool:
        """Whether ``step(action)`` searches the catalog (scores every product); any other action only changes the page
        or, with Buy Now, scores the one product bought."""
        match = _ACTION.match(action)
        return bool(match and match.group(1) == "search" and match.group(2))

    def step(self, action: str) -> tuple[float, bool, dict[str, Any]]:
        """Apply ``search[...]``/``click[...]``: (reward, done, info). Anything not applicable changes nothing.

        ``info["effect"]`` says what happened (``search``, ``click``, ``noop``), ``info["error"]`` why an
        action did nothing. Buy Now ends the episode (done) with the purchase's reward and its breakdown.
        """
        match = _ACTION.match(action)
        name, arg = (match.group(1), match.group(2).lower()) if match else (action, None)
        if name == "search" and arg:
            self.keywords = arg
            self.hits = self.shop.search(self.keywords)
            self.page, self.page_no, self.product, self.options = RESULTS, 1, None, {}
            return 0.0, False, {"effect": "search", "results": len(self.hits)}
        if name == "click" and arg is not None and arg != "search":
            target = self._view()[1].get(arg)
            if target is not None:
                return self._click(target)
            return 0.0, False, {"effect": "noop", "error": f"{arg[:80]!r} is not a clickable of this page"}
        if name == "click" and arg == "search":
            return 0.0, False, {"effect": "noop", "error": "the search button is used with search[...]"}
        return 0.0, False, {"effect": "noop", "error": f"not a search[...] or click[...] action: {action[:80]!r}"}

    def _click(self, target: Target) -> tuple[float, bool, dict[str, Any]]:
        kind = target[0]
        info: dict[str, Any] = {"effect": "click"}
        if kind == "back":
            self.page, self.keywords, self.hits, self.page_no, self.product, self.options = SEARCH, "", [], 1, None, {}
        elif kind == "next":
            self.page_no += 1
        elif kind == "prev":
            if self.page == RESULTS:
                self.page_no -= 1
            elif self.page == ITEM:
                self.page, self.product, self.options = RESULTS, None, {}
            else:
                self.page = ITEM
        elif kind == "asin":
            self.page, self.product, self.options = ITEM, target[1], {}
        elif kind == "sub":
            self.page = target[1]
        elif kind == "option":
            self.options[target[1]] = target[2]
        elif kind == "buy":
            assert self.product is not None
            product = self.shop.products[self.product]
            score, breakdown = self.shop.reward(product, self.goal, dict(self.options))
            info.update(bought=product.asin, options=dict(self.options), price=product.price, reward_info=breakdown)
            return score, True, info
        return 0.0, False, info


def _nonempty(segments: list[str]) -> list[str]:
    return [s for s in segments if s]
