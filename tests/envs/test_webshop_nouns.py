"""webshop: who tags title nouns (spaCy as upstream, or the heuristic), and the run settings that say so.

The spaCy path runs a real spaCy pipeline: a blank English one whose attribute ruler tags a few words, saved to
a folder and passed as ``spacy_model`` (upstream's en_core_web_lg is not on PyPI and not on this machine).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench_async.envs.webshop import WebShopEnvironment
from agentbench_async.envs.webshop.nouns import default_source, noun_tagger, spacy_available
from agentbench_async.errors import EnvUnavailableError
from agentbench_async.settings import deviations
from test_webshop_data import write_webshop


@pytest.fixture(scope="module")
def spacy_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add(patterns=[[{"LOWER": {"IN": ["shoe", "sole", "socks"]}}]], attrs={"POS": "NOUN"})
    ruler.add(patterns=[[{"LOWER": {"IN": ["acme", "merino"]}}]], attrs={"POS": "PROPN"})
    folder = tmp_path_factory.mktemp("spacy") / "tiny_tagger"
    nlp.to_disk(folder)
    return folder


def test_spacy_tags_titles_keeping_nouns_and_proper_nouns(spacy_model: Path) -> None:
    nouns, name = noun_tagger("spacy", str(spacy_model))
    assert nouns("Acme Men's Running Shoe with a Rubber Sole") == ("acme", "shoe", "sole")
    assert name == f"spacy:{spacy_model}"
    assert spacy_available(str(spacy_model)) and default_source(str(spacy_model)) == "spacy"


def test_a_missing_model_is_the_heuristic_by_default_and_a_clear_error_when_asked_for() -> None:
    assert not spacy_available("en_core_web_not_installed")
    assert default_source("en_core_web_not_installed") == "heuristic"
    with pytest.raises(EnvUnavailableError, match="webshop.nouns=heuristic"):
        noun_tagger("spacy", "en_core_web_not_installed")
    nouns, name = noun_tagger("heuristic")
    assert name == "heuristic" and nouns("Merino Running Socks 3 Pack") == ("merino", "running", "socks", "pack")


def test_the_environment_tags_official_titles_with_the_chosen_source(tmp_path: Path, spacy_model: Path) -> None:
    data = write_webshop(tmp_path / "webshop")  # official format: titles without precomputed nouns
    env = WebShopEnvironment(options={"webshop_data": str(data), "nouns": "spacy", "spacy_model": str(spacy_model)})
    shop = env.shop()
    assert shop.nouns_source == f"spacy:{spacy_model}"
    assert shop.title_nouns(shop.catalog.product("B07SOCK001")) == ("merino", "socks")
    heuristic = WebShopEnvironment(options={"webshop_data": str(data), "nouns": "heuristic"}).shop()
    assert heuristic.nouns_source == "heuristic"
    assert heuristic.title_nouns(heuristic.catalog.product("B07SOCK001")) == ("merino", "running", "socks", "pack")


def test_the_built_in_catalogue_uses_its_own_nouns_whatever_the_option() -> None:
    shop = WebShopEnvironment(options={"nouns": "heuristic"}).shop()
    assert shop.nouns_source == "precomputed"


def _config(**webshop: object) -> dict[str, object]:
    return {"envs": ["webshop"], "data_dir": None, "split": "test", "history": "agentbench", "action_mode": "text",
            "env_options": {"webshop": webshop}}


def test_heuristic_nouns_on_official_data_are_a_named_deviation() -> None:
    found = {d.setting: d for d in deviations(_config(webshop_data="/data/webshop", nouns="heuristic"))}
    assert "webshop.nouns" in found and found["webshop.nouns"].value.startswith("heuristic")
    assert "webshop.nouns" not in {d.setting for d in deviations(_config(webshop_data="/data/webshop", nouns="spacy"))}


@pytest.mark.parametrize(
    ("option", "value"),
    [("test_range", "0:50"), ("dev_range", "0:80"), ("price_seed", "7"), ("spacy_model", "en_core_web_sm")],
)
def test_options_that_change_results_are_settings(option: str, value: str) -> None:
    found = {d.setting: d.value for d in deviations(_config(webshop_data="/data/webshop", nouns="spacy", **{option: value}))}
    assert found.get(f"webshop.{option}") == value
    same = {d.setting for d in deviations(_config(webshop_data="/data/webshop", nouns="spacy"))}
    assert f"webshop.{option}" not in same


def test_the_run_stores_which_tagger_this_machine_uses(tmp_path: Path) -> None:
    from agentbench_async.cli import _parser, _run_settings
    from agentbench_async.config import build_config

    data = write_webshop(tmp_path / "webshop")
    base = ["run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--env", "webshop", "--out", str(tmp_path / "r.duckdb")]

    def config(*extra: str):  # type: ignore[no-untyped-def]
        return build_config(_run_settings(_parser().parse_args([*base, *extra])), where="flags")

    official = config("--webshop-data", str(data))
    assert official.env_options["webshop"]["nouns"] == default_source()  # "heuristic" here: no en_core_web_lg
    flagged = {d["setting"] for d in official.public_dict()["agentbench_deviations"]}
    assert ("webshop.nouns" in flagged) == (default_source() == "heuristic")
    assert config("--webshop-data", str(data), "--env-option", "webshop.nouns=spacy").env_options["webshop"]["nouns"] == "spacy"
    assert "nouns" not in config().env_options.get("webshop", {})  # built-in catalogue: nouns come with it
