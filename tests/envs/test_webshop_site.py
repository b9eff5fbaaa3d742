"""webshop: page texts, clickables, actions and search (WebShop's text environment, spec §2 and §5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench_async.envs.webshop.catalog import Catalog, Goal, Product
from agentbench_async.envs.webshop.nouns import heuristic_nouns
from agentbench_async.envs.webshop.site import Browser, Shop

INSTRUCTION = "i am looking for men's running shoes with a rubber sole, model 11, and price lower than 60.00 dollars"


def _product(asin: str, title: str, **kw: object) -> Product:
    fields: dict[str, object] = {
        "asin": asin,
        "title": title,
        "description": f"About the {title}.",
        "bullets": ("First point.", "Second point."),
        "pricing": (10.0,),
        "price_tag": "$10.0",
        "price": 10.0,
        "options": {},
        "category": "fashion",
        "query": "running shoes",
        "product_category": "shoes › men › running",
        "attributes": ("rubber sole",),
        "title_nouns": None,
    }
    fields.update(kw)
    return Product(**fields)  # type: ignore[arg-type]


SHOE = _product(
    "B07ACME011",
    "Acme Men's Running Shoe Model 11",
    description="  A light shoe with a rubber sole.  ",
    bullets=("Rubber sole", "Mesh upper", "Model 11 fit"),
    pricing=(24.5, 59.0),
    price_tag="$24.5 to $59.0",
    price=30.0,
    options={"color": ("black", "navy blue", "light grey"), "size": ("small", "medium", "x-large")},
)


def _shop(products: list[Product]) -> Shop:
    catalog = Catalog(products=products, index={p.asin: i for i, p in enumerate(products)}, goals=[], folder=Path("."))
    return Shop(catalog, heuristic_nouns, "heuristic")


def _goal(**kw: object) -> Goal:
    fields: dict[str, object] = {
        "asin": SHOE.asin,
        "category": "fashion",
        "query": "running shoes",
        "name": SHOE.title,
        "product_category": SHOE.product_category,
        "instruction_text": INSTRUCTION,
        "attributes": ("rubber sole",),
        "price_upper": 60.0,
        "goal_options": ("navy blue", "x-large"),
    }
    fields.update(kw)
    return Goal(**fields)  # type: ignore[arg-type]


FILLERS = [_product(f"B00FILL{i:03d}", f"Trail Running Shoe Number {i}", price_tag=f"${10 + i}.0") for i in range(24)]


@pytest.fixture
def browser() -> Browser:
    return Browser(_shop([SHOE, *FILLERS]), _goal())


def test_search_page_text_and_actions(browser: Browser) -> None:
    assert browser.observation() == f"WebShop [SEP] Instruction: [SEP] {INSTRUCTION} [SEP] Search"
    assert browser.available_actions() == {"has_search_bar": True, "clickables": ["search"]}
    # the engine shows the dict with Python's str(): single quotes, True/False
    assert str(browser.available_actions()) == "{'has_search_bar': True, 'clickables': ['search']}"


def test_item_page_matches_the_verified_sample(browser: Browser) -> None:
    browser.step("search[acme running shoe model 11]")
    browser.step("click[B07ACME011]")
    assert browser.observation() == (
        f"Instruction: [SEP] {INSTRUCTION} [SEP] Back to Search [SEP] < Prev [SEP] color [SEP] black [SEP] navy blue "
        "[SEP] light grey [SEP] size [SEP] small [SEP] medium [SEP] x-large [SEP] Acme Men's Running Shoe Model 11 "
        "[SEP] Price: $24.5 to $59.0 [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
    )
    assert browser.available_actions() == {
        "has_search_bar": False,
        "clickables": ["back to search", "< prev", "description", "features", "reviews", "buy now",
                       "black", "navy blue", "light grey", "small", "medium", "x-large"],
    }
    # choosing options does not change the page (it never says what is selected)
    page = browser.observation()
    browser.step("click[navy blue]")
    assert browser.observation() == page and browser.options == {"color": "navy blue"}


def test_results_pages_list_ten_products_and_always_offer_next(browser: Browser) -> None:
    assert browser.step("search[running shoe]") == (0.0, False, {"effect": "search", "results": 25})
    segments = browser.observation().split(" [SEP] ")
    assert segments[:5] == ["Instruction:", INSTRUCTION, "Back to Search", "Page 1 (Total results: 25)", "Next >"]
    assert len(segments) == 5 + 3 * 10
    first = segments[5:8]
    assert first[0].startswith("B0") and first[2].startswith("$")  # ASIN as written, title, price
    clickables = browser.available_actions()["clickables"]
    assert clickables[:2] == ["back to search", "next >"] and clickables[2] == first[0].lower()
    browser.step("click[next >]")
    assert "Page 2 (Total results: 25) [SEP] < Prev [SEP] Next >" in browser.observation()
    browser.step("click[next >]")
    assert len(browser.observation().split(" [SEP] ")) == 6 + 3 * 5  # the last 5 products
    browser.step("click[next >]")  # past the end: an empty page, Next > still there
    assert browser.observation().endswith("Page 4 (Total results: 25) [SEP] < Prev [SEP] Next >")
    browser.step("click[< prev]")
    assert "Page 3 " in browser.observation()


def test_a_search_without_hits_shows_zero_results(browser: Browser) -> None:
    browser.step("search[zeppelin]")
    assert browser.observation().endswith("Back to Search [SEP] Page 1 (Total results: 0) [SEP] Next >")


def test_navigation_between_item_sub_pages_and_results(browser: Browser) -> None:
    browser.step("search[acme model 11]")
    browser.step("click[next >]")
    browser.step("click[< prev]")
    browser.step("click[b07acme011]")  # lower-case works: the argument is lower-cased
    browser.step("click[x-large]")
    browser.step("click[description]")
    assert browser.observation() == f"Instruction: [SEP] {INSTRUCTION} [SEP] Back to Search [SEP] < Prev [SEP] A light shoe with a rubber sole."
    assert browser.available_actions()["clickables"] == ["back to search", "< prev"]
    browser.step("click[< prev]")
    browser.step("click[features]")
    assert browser.observation().endswith("< Prev [SEP] Rubber sole [SEP] Mesh upper [SEP] Model 11 fit")
    browser.step("click[< prev]")
    browser.step("click[reviews]")
    assert browser.observation().endswith("Back to Search [SEP] < Prev")  # reviews are never loaded
    browser.step("click[< prev]")
    assert browser.page == "item" and browser.options == {"size": "x-large"}  # options kept from sub-pages
    browser.step("click[< prev]")
    assert browser.page == "results" and browser.page_no == 1 and browser.options == {}
    browser.step("click[back to search]")
    assert browser.page == "search" and browser.hits == []


def test_search_works_from_any_page_and_resets_the_product(browser: Browser) -> None:
    browser.step("search[acme]")
    browser.step("click[b07acme011]")
    browser.step("click[black]")
    assert browser.available_actions()["has_search_bar"] is False
    _, done, info = browser.step("search[trail running]")  # upstream does not check has_search_bar
    assert not done and info["effect"] == "search"
    assert browser.page == "results" and browser.product is None and browser.options == {}


@pytest.mark.parametrize(
    "action",
    ["click[search]", "click[buy now]", "click[b00fill001]", "click [next >]", "buy[now]", "click[]", "search[]", "Search[x]"],
)
def test_actions_that_do_not_apply_change_nothing(browser: Browser, action: str) -> None:
    browser.step("search[acme model 11]")
    before = (browser.observation(), browser.available_actions())
    score, done, info = browser.step(action)
    assert (score, done, info["effect"]) == (0.0, False, "noop") and info["error"]
    assert (browser.observation(), browser.available_actions()) == before


def test_reclicking_a_group_overwrites_and_colliding_values_go_to_the_last_group() -> None:
    clash = _product("B0CLASH001", "Clash Shoe", options={"color": ("black", "red"), "trim": ("red", "white")})
    b = Browser(_shop([clash]), _goal(asin=clash.asin))
    b.step("search[clash]")
    b.step("click[b0clash001]")
    assert b.available_actions()["clickables"][6:] == ["black", "red", "white"]  # listed once, first position
    b.step("click[black]")
    b.step("click[red]")
    assert b.options == {"color": "black", "trim": "red"}
    b.step("click[white]")
    assert b.options == {"color": "black", "trim": "white"}


def test_buy_now_ends_with_the_reward_of_the_product_and_options(browser: Browser) -> None:
    browser.step("search[acme model 11]")
    browser.step("click[b07acme011]")
    browser.step("click[navy blue]")
    browser.step("click[x-large]")
    score, done, info = browser.step("click[Buy Now]")
    assert done and score == 1.0
    assert info["bought"] == "B07ACME011" and info["options"] == {"color": "navy blue", "size": "x-large"}
    assert info["reward_info"]["r_option"] == 1.0 and info["reward_info"]["r_price"] is True


def test_buying_without_the_options_or_over_budget_loses_their_share() -> None:
    shop = _shop([SHOE, *FILLERS])
    b = Browser(shop, _goal(price_upper=20.0))
    b.step("search[acme model 11]")
    b.step("click[b07acme011]")
    score, done, info = b.step("click[buy now]")
    # 1 attribute + 2 options + price: only the attribute matches
    assert done and score == pytest.approx(1 / 4) and info["reward_info"]["r_price"] is False
