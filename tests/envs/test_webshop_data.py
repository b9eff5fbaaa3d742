"""webshop: WebShop's data formats (products, attributes, human goals), goal construction, the built-in
catalog and its generator, and the oracle on a small catalog in the official format.

WebShop's own files (items_shuffle.json, ~1.18 M products) are not available here: the official-format tests
use small files written below in exactly that format.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentbench_async.envs.webshop import WebShopEnvironment
from agentbench_async.envs.webshop import jsonstream
from agentbench_async.envs.webshop.catalog import load_catalog, parse_pricing
from agentbench_async.envs.webshop.tasks import builtin_dir
from agentbench_async.errors import ConfigError, TaskFileError
from agentbench_async.testing import play
from support import load_generator



def _raw(asin: str, name: str, pricing: str, **kw: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "asin": asin,
        "name": name,
        "full_description": f"{name}. Sturdy and simple.",
        "small_description": [f"{name} feature one", "feature two"],
        "pricing": pricing,
        "customization_options": None,
        "images": [f"https://images.example/{asin}.jpg"],
        "category": "fashion",
        "query": " Running Shoes ",
        "product_category": "Clothing, Shoes & Jewelry › Men › Shoes › Running",
        # keys WebShop's loader drops
        "brand": "Acme",
        "product_information": {"weight": "1 pound"},
        "total_reviews": 3,
    }
    record.update(kw)
    return record


PRODUCTS = [
    _raw("B07ACME011", "Acme Men's Running Shoe Model 11", "$24.50 - $59.00", customization_options={
        "Color": [{"value": "Black", "image": None}, {"value": "Navy/Blue", "image": "x.jpg"}, {"value": "Light Grey", "image": None}],
        "Size": [{"value": "Small", "image": None}, {"value": "Medium", "image": None}, {"value": "X-Large", "image": None}],
        "Style": None,
    }),
    _raw("B07ACME012", "Acme Men's Trail Shoe Model 12", "$39.99", small_description="One bullet as a string"),
    _raw("B07BOLT001", "Bolt Lightweight Road Running Shoe", "$1,299.00"),
    _raw("B07ZERO001", "Zero Price Sandal", ""),
    _raw("nan", "Broken product", "$5.00"),
    _raw("B07TOOLONG01", "Product with a long ASIN", "$5.00"),
    _raw("B07ACME012", "Duplicate of model 12", "$1.00"),
    _raw("B07LUXE001", "Luxe Leather Running Shoe", "$985.00"),
    _raw("B07SOCK001", "Merino Running Socks 3 Pack", "$12.00", category="fashion", query="running socks",
         product_category="Clothing, Shoes & Jewelry › Men › Clothing › Socks",
         customization_options={"Size": [{"value": "M", "image": None}, {"value": "L", "image": None}]}),
]
ATTRIBUTES = {
    "B07ACME011": {"attributes": ["rubber sole", "lightweight"], "instruction": "x", "instruction_attributes": ["rubber sole"]},
    "B07ACME012": {"attributes": ["rubber sole", "water resistant"], "instruction": "x", "instruction_attributes": []},
    "B07BOLT001": {"instruction": "no attributes key"},
    "B07LUXE001": {"attributes": ["genuine leather"]},
    "B07SOCK001": {"attributes": ["merino wool", "moisture wicking"]},
}


def _ins(asin: str, text: str, attrs: list[str], options: list[str]) -> dict[str, Any]:
    return {"asin": asin, "instruction": text, "instruction_attributes": attrs, "instruction_options": options,
            "attributes": attrs, "options": {}, "assignment_id": "A1", "worker_id": "W1"}


HUMAN = {
    "B07ACME011": [
        _ins("B07ACME011", "i am looking for men's running shoes with a rubber sole, model 11.", ["rubber sole"], ["navy blue", "x-large"]),
        _ins("B07ACME011", "i want lightweight running shoes in black", ["lightweight"], ["black"]),
        _ins("B07ACME011", "shoes please", [], []),  # no attributes: not a goal
    ],
    "B07ACME012": [_ins("B07ACME012", "i need water resistant trail shoes", ["water resistant"], [])],
    "B07LUXE001": [_ins("B07LUXE001", "i need a genuine leather running shoe", ["genuine leather"], [])],
    "B07SOCK001": [_ins("B07SOCK001", "i want merino running socks in size l", ["merino wool", "moisture wicking"], ["l"])],
    "B0UNKNOWN1": [_ins("B0UNKNOWN1", "a product that is not in the catalog", ["x"], [])],
}


def write_webshop(folder: Path, products: list[dict[str, Any]] = PRODUCTS, *, small_names: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    names = ("items_shuffle_1000.json", "items_ins_v2_1000.json") if small_names else ("items_shuffle.json", "items_ins_v2.json")
    (folder / names[0]).write_text(json.dumps(products, indent=2), encoding="utf-8")
    (folder / names[1]).write_text(json.dumps(ATTRIBUTES), encoding="utf-8")
    (folder / "items_human_ins.json").write_text(json.dumps(HUMAN), encoding="utf-8")
    return folder


# -- products ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "prices", "tag"),
    [
        ("$17.99", (17.99,), "$17.99"),
        ("$12.99 - $19.99", (12.99, 19.99), "$12.99 to $19.99"),
        ("$10", (10.0,), "$10.0"),
        ("$1,299.00", (1299.0,), "$1299.0"),
        ("$1.00 - $2.00 - $3.00", (1.0, 2.0), "$1.0 to $2.0"),
        ("", (100.0,), "$100.0"),
        (None, (100.0,), "$100.0"),
    ],
)
def test_prices_are_parsed_as_webshop_does(text: str | None, prices: tuple[float, ...], tag: str) -> None:
    assert parse_pricing(text, "here") == (prices, tag)


def test_bad_prices_name_the_record() -> None:
    with pytest.raises(TaskFileError, match=r"here: cannot read the price"):
        parse_pricing("$1.2.3", "here")
    with pytest.raises(TaskFileError, match="no '\\$' amount"):
        parse_pricing("free", "here")


def test_products_load_with_webshop_rules(tmp_path: Path) -> None:
    catalog = load_catalog(write_webshop(tmp_path / "ws"))
    assert [p.asin for p in catalog.products] == ["B07ACME011", "B07ACME012", "B07BOLT001", "B07ZERO001", "B07LUXE001", "B07SOCK001"]
    shoe = catalog.product("B07ACME011")
    assert shoe.options == {"color": ("black", "navy | blue", "light grey"), "size": ("small", "medium", "x-large")}
    assert shoe.price_tag == "$24.5 to $59.0" and 24.5 <= shoe.price <= 59.0
    assert shoe.query == "running shoes" and shoe.attributes == ("rubber sole", "lightweight")
    trail = catalog.product("B07ACME012")
    assert trail.title == "Acme Men's Trail Shoe Model 12"  # the first of two records with this ASIN
    assert trail.bullets == ("One bullet as a string",) and trail.price == 39.99
    assert catalog.product("B07BOLT001").attributes == ("DUMMY_ATTR",)
    assert catalog.product("B07ZERO001").price == 100.0
    assert all(p.title_nouns is None for p in catalog.products)  # tagged when the reward needs them


def test_sampled_prices_follow_the_price_seed(tmp_path: Path) -> None:
    folder = write_webshop(tmp_path / "ws")
    a, b = load_catalog(folder), load_catalog(folder)
    assert a.product("B07ACME011").price == b.product("B07ACME011").price
    assert [g.instruction_text for g in a.goals] == [g.instruction_text for g in b.goals]
    other = {load_catalog(folder, price_seed=s).product("B07ACME011").price for s in range(1, 6)}
    assert len(other) > 1


# -- goals ---------------------------------------------------------------------------------------------


def test_goals_are_built_then_shuffled_with_seed_233(tmp_path: Path) -> None:
    catalog = load_catalog(write_webshop(tmp_path / "ws"))
    # in file order: 2 goals of model 11 (the third has no attributes), 1 of model 12, 1 luxe, 1 socks;
    # B0UNKNOWN1 is not a loaded product
    before = ["i am looking for men's running shoes with a rubber sole, model 11", "i want lightweight running shoes in black",
              "i need water resistant trail shoes", "i need a genuine leather running shoe", "i want merino running socks in size l"]
    random.Random(233).shuffle(before)
    assert [g.instruction_text.split(", and price")[0] for g in catalog.goals] == before
    by_text = {g.instruction_text.split(", and price")[0]: g for g in catalog.goals}
    shoe = by_text["i am looking for men's running shoes with a rubber sole, model 11"]  # trailing '.' stripped
    assert shoe.goal_options == ("navy blue", "x-large") and shoe.attributes == ("rubber sole",)
    assert shoe.name == "Acme Men's Running Shoe Model 11" and shoe.query == "running shoes"
    # price bound: 2nd, 3rd or 4th multiple of 10 above the sampled price
    price = catalog.product("B07ACME011").price
    above = [p for p in (10.0 * i for i in range(1, 100)) if p > price][:4]
    assert shoe.price_upper in above[1:]
    assert shoe.instruction_text.endswith(f", and price lower than {shoe.price_upper:.2f} dollars")
    # a product priced 985: fewer than two bounds below 1000, so no price clause
    luxe = by_text["i need a genuine leather running shoe"]
    assert luxe.price_upper == 1_000_000 and luxe.instruction_text == "i need a genuine leather running shoe"


def test_the_1000_product_file_names_are_accepted(tmp_path: Path) -> None:
    assert len(load_catalog(write_webshop(tmp_path / "ws", small_names=True)).goals) == 5


def test_missing_or_broken_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="does not exist"):
        load_catalog(tmp_path / "nothing")
    folder = write_webshop(tmp_path / "ws")
    (folder / "items_human_ins.json").unlink()
    with pytest.raises(TaskFileError, match="has no items_human_ins.json"):
        load_catalog(folder)
    folder = write_webshop(tmp_path / "ws2")
    (folder / "items_shuffle.json").write_text('[{"asin": "B1", "name": "x"}, {"asin": ', encoding="utf-8")
    with pytest.raises(TaskFileError, match="items_shuffle.json: not valid JSON"):
        load_catalog(folder)
    folder = write_webshop(tmp_path / "ws3", [_raw("B07BAD0001", "Bad", "$1", customization_options={"Size": "L"})])
    with pytest.raises(TaskFileError, match=r"product 0 \(asin B07BAD0001\): customization option 'Size'"):
        load_catalog(folder)


def test_the_streaming_reader_handles_values_across_read_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "_CHUNK", 7)
    path = tmp_path / "a.json"
    data = [{"asin": "B1", "n": 12345678901234, "s": "a \u203a b", "l": [1, 2.5, None, True]}, 42, "x" * 50, []]
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    assert list(jsonstream.iter_array(path)) == data
    obj = tmp_path / "o.json"
    obj.write_text(json.dumps({"k1": data, "k2": {}}), encoding="utf-8")
    assert dict(jsonstream.iter_object(obj)) == {"k1": data, "k2": {}}
    path.write_text("[]", encoding="utf-8")
    assert list(jsonstream.iter_array(path)) == []
    path.write_bytes(b'["caf\xe9"]')
    with pytest.raises(TaskFileError, match="not UTF-8"):
        list(jsonstream.iter_array(path))
    obj.write_text("[1]", encoding="utf-8")
    with pytest.raises(TaskFileError, match="expected a JSON object"):
        list(jsonstream.iter_object(obj))


# -- the environment on official-format data --------------------------------------------------------------


def test_splits_are_goal_index_ranges(tmp_path: Path) -> None:
    folder = write_webshop(tmp_path / "ws")
    env = WebShopEnvironment(options={"webshop_data": str(folder), "test_range": "0:3", "dev_range": "3:5"})
    test, dev = list(env.tasks("test")), list(env.tasks("dev"))
    assert [t.task_id for t in test] == ["0", "1", "2"] and [t.task_id for t in dev] == ["3", "4"]
    assert all(t.source == "official" for t in test + dev)
    assert test[0].data["goal"]["instruction_text"] == env.catalog().goals[0].instruction_text
    # AgentBench's ranges (std 0..199, dev 200..279) need 280 goals
    with pytest.raises(TaskFileError, match=r"gives 5 goals but split 'test' uses goal indices 0\.\.199; pass --env-option webshop.test_range"):
        list(WebShopEnvironment(options={"webshop_data": str(folder)}).tasks("test"))
    with pytest.raises(ConfigError, match="START:END"):
        list(WebShopEnvironment(options={"webshop_data": str(folder), "dev_range": "5"}).tasks("dev"))


def test_agentbench_data_dir_has_no_webshop_files(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="--webshop-data DIR"):
        list(WebShopEnvironment(data_dir=tmp_path).tasks("dev"))
    write_webshop(tmp_path / "webshop")
    env = WebShopEnvironment(data_dir=tmp_path, options={"dev_range": "0:5"})
    assert env.count("dev") == 5 and next(iter(env.tasks("dev"))).source == "official"


@pytest.mark.parametrize("mode", ["text", "tools"])
async def test_oracle_buys_every_fixture_goal_for_full_reward(tmp_path: Path, mode: str) -> None:
    env = WebShopEnvironment(options={"webshop_data": str(write_webshop(tmp_path / "ws")), "test_range": "0:5"})
    await env.start()
    tasks = list(env.tasks("test"))
    sock = next(t for t in tasks if t.data["goal"]["asin"] == "B07SOCK001")
    assert sock.data["reference"]["options"] == ["l"]
    shoe = next(t for t in tasks if t.data["goal"]["goal_options"] == ["navy blue", "x-large"])
    assert shoe.data["reference"]["options"] == ["navy | blue", "x-large"]  # matched as the reward compares them
    for task in tasks:
        record = await play(env, task, "oracle", action_mode=mode)
        assert (record.status, record.score) == ("completed", 1.0), (task.task_id, record.error, record.details)
        assert record.details["title_nouns"] in ("heuristic", "spacy:en_core_web_lg")


# -- the built-in catalog ----------------------------------------------------------------------------------


def test_builtin_catalog_is_big_varied_and_compact() -> None:
    folder = builtin_dir()
    assert sum(f.stat().st_size for f in folder.glob("*.json")) < 3_000_000
    catalog = load_catalog(folder)
    assert len(catalog.products) >= 1000 and len(catalog.goals) >= 280
    assert Counter(p.category for p in catalog.products).keys() == {"beauty", "electronics", "fashion", "food", "furniture"}
    assert sum(1 for p in catalog.products if p.options) > 800 and sum(1 for p in catalog.products if len(p.pricing) == 2) > 100
    assert all(p.title_nouns for p in catalog.products)
    assert Counter(len(g.goal_options) for g in catalog.goals).keys() >= {0, 1, 2}
    assert any(g.price_upper == 1_000_000 for g in catalog.goals)  # some goals have no price clause
    env = WebShopEnvironment()
    dev, test = list(env.tasks("dev")), list(env.tasks("test"))
    assert (len(dev), len(test)) == (80, 200)
    assert [t.task_id for t in test[:3]] == ["0", "1", "2"] and dev[0].task_id == "200"
    assert all(t.source == "builtin" for t in dev + test)


def test_generator_output_is_committed_unchanged() -> None:
    for name, text in load_generator("webshop").build().items():
        assert (builtin_dir() / name).read_text(encoding="utf-8") == text, (
            f"environments/webshop/{name} is stale: run PYTHONPATH=src python environments/webshop/generate.py"
        )


async def test_mock_model_plays_official_format_goals_over_http_with_the_run_s_data_flag(tmp_path: Path) -> None:
    """`serve-mock --webshop-data DIR` + `run --webshop-data DIR`: the mock builds the environment with the same
    option, so its oracle can play official-format goals through the real HTTP path."""
    from engine_support import query, run, start_mock

    from agentbench_async.cli import _parser, _run_settings
    from agentbench_async.config import build_config

    folder = str(write_webshop(tmp_path / "ws"))
    args = _parser().parse_args(["serve-mock", "--webshop-data", folder])
    assert args.webshop_data == Path(folder)
    server = await start_mock(env_options={"webshop": {"webshop_data": folder, "test_range": "0:3"}})
    try:
        args = _parser().parse_args(["run", "--model", "mock-oracle", "--base-url", server.base_url, "--env", "webshop",
                                     "--webshop-data", folder, "--env-option", "webshop.test_range=0:3",
                                     "--out", str(tmp_path / "r.duckdb")])  # fmt: skip
        raw = _run_settings(args)
        raw["models"][0]["task_header"] = True
        summary = await run(build_config(raw, where="test"))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 3}
    assert query(tmp_path / "r.duckdb", "SELECT count(*), avg(score) FROM episodes") == [(3, 1.0)]
