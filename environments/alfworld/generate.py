"""Generate the built-in ALFWorld games, split files and one-shot examples from the rooms authored below.

Run from the project root: ``.venv/bin/python environments/alfworld/generate.py`` (needs the ``alfworld``
extra: the games embed ALFWorld's PDDL domain and TextWorld grammar, converted from the installed
package to the 2.1.1 form AgentBench used, and every game is played through TextWorld here). The output
is deterministic; ``tests/envs/test_alfworld_games.py`` checks the committed files match a fresh run.

Output (paths relative to this folder, which is the built-in suites' ALFWorld data root):

* ``games/<split>/<task_type>-<Obj>-None-<Recep|Lamp>-<scene>/trial_<split>_<n>/game.tw-pddl`` — the game
  (ALFWorld's format: ``pddl_domain``, ``grammar`` with the task text, ``pddl_problem``, ``solvable``,
  ``walkthrough``) and ``traj_data.json`` beside it (the fields ALFWorld's own loaders read);
* ``dev.json`` / ``test.json`` — AgentBench's split-file format: the six task-type keys, each a list of
  game paths;
* ``prompts.json`` — one worked example per task type in the format of AgentBench's
  ``alfworld_multiturn_plan_first.json``, made by playing six example games (not in either split).

Every room below is written for this project: receptacles with their counts, and the objects lying in
or on them. A task names its room, its type, the object and the receptacle (or lamp), optionally which
instance to use; the walkthrough is derived from the room (walk to the object, open what is closed,
take it, clean/heat/cool it, walk to the target, open it, put it) and checked by playing it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# -- vocabulary ---------------------------------------------------------------------------------------

TYPE_NAMES = {  # display name -> ALFRED type name
    name.lower(): name
    for name in """AlarmClock Apple ArmChair BathtubBasin Bed Book Bowl Box Bread ButterKnife Cabinet Candle CD
    CellPhone Cloth CoffeeMachine CoffeeTable CounterTop CreditCard Cup Desk DeskLamp DiningTable DishSponge
    Drawer Dresser Egg FloorLamp Fork Fridge GarbageCan HandTowel HandTowelHolder Kettle KeyChain Knife Ladle
    Laptop LaundryHamper Lettuce Microwave Mug Newspaper Pan Pen Pencil PepperShaker Pillow Plate Pot Potato
    RemoteControl Safe SaltShaker Shelf SideTable SinkBasin Sofa SoapBar SoapBottle Spatula Spoon SprayBottle
    Statue StoveBurner Toaster Toilet ToiletPaper Tomato Towel TowelHolder TVStand Vase Watch WineBottle""".split()
}

FOOD = {"apple", "bread", "egg", "lettuce", "potato", "tomato"}
DISHES = {"mug", "cup", "bowl", "plate", "pan", "pot"}
UTENSILS = {"fork", "spoon", "knife", "butterknife", "spatula", "ladle"}
KITCHEN = {"saltshaker", "peppershaker", "dishsponge", "winebottle", "kettle", "soapbottle"}
BATH = {"soapbar", "cloth", "spraybottle", "toiletpaper", "candle", "soapbottle"}
SMALL = {"pencil", "pen", "cd", "cellphone", "creditcard", "keychain", "watch"}
DESK = SMALL | {"book", "alarmclock", "laptop", "remotecontrol", "newspaper", "statue", "vase", "box", "mug", "cup", "bowl"}
SOFT = {"pillow", "laptop", "book", "cellphone", "remotecontrol", "newspaper", "creditcard", "keychain"}
LAMPS = {"desklamp", "floorlamp"}

OPENABLE = {"cabinet", "drawer", "fridge", "microwave", "safe"}
CLEANABLE = (FOOD - {"bread", "egg"}) | DISHES | UTENSILS | {"cloth", "soapbar", "dishsponge"}
HEATABLE = FOOD | {"mug", "cup", "plate"}
COOLABLE = FOOD | DISHES | {"winebottle"}
SLICEABLE = {"apple", "bread", "lettuce", "potato", "tomato"}
RECEPTACLE_OBJECTS = DISHES | {"box"}

_TABLE = FOOD | DISHES | UTENSILS | KITCHEN | DESK
CAN_CONTAIN: dict[str, set[str]] = {
    "countertop": _TABLE | BATH,
    "diningtable": _TABLE,
    "cabinet": DISHES | KITCHEN | BATH | SMALL | {"book", "box", "vase", "statue", "towel", "handtowel"},
    "drawer": UTENSILS | SMALL | BATH | {"book", "remotecontrol", "dishsponge", "saltshaker", "peppershaker"},
    "fridge": FOOD | DISHES | {"winebottle"},
    "microwave": FOOD | {"mug", "cup", "bowl", "plate"},
    "sinkbasin": FOOD | DISHES | UTENSILS | {"dishsponge", "soapbar", "cloth"},
    "stoveburner": {"pan", "pot", "kettle"},
    "garbagecan": FOOD | SMALL | BATH | {"newspaper", "dishsponge"},
    "coffeemachine": {"mug"},
    "toaster": set(),
    "shelf": DESK | BATH | DISHES | KITCHEN,
    "desk": DESK | SOFT,
    "sidetable": DESK | SOFT,
    "dresser": DESK | SOFT | BATH,
    "coffeetable": DESK | SOFT,
    "tvstand": DESK,
    "bed": SOFT,
    "sofa": SOFT,
    "armchair": SOFT,
    "safe": SMALL | {"statue", "vase"},
    "toilet": BATH,
    "bathtubbasin": {"soapbar", "cloth"},
    "towelholder": {"towel"},
    "handtowelholder": {"handtowel"},
    "laundryhamper": {"cloth", "towel"},
}

# task-type key (split files) -> (prompt key, ALFWorld task_type, two templates of the task text)
TASK_TYPES: dict[str, tuple[str, str, tuple[str, str]]] = {
    "pick_and_place": ("put", "pick_and_place_simple", ("put a {obj} in {recep}", "put some {obj} on {recep}")),
    "pick_clean_then_place": ("clean", "pick_clean_then_place_in_recep", ("put a clean {obj} in {recep}", "clean some {obj} and put it in {recep}")),
    "pick_heat_then_place": ("heat", "pick_heat_then_place_in_recep", ("put a hot {obj} in {recep}", "heat some {obj} and put it in {recep}")),
    "pick_cool_then_place": ("cool", "pick_cool_then_place_in_recep", ("put a cool {obj} in {recep}", "cool some {obj} and put it in {recep}")),
    "look_at_obj": ("examine", "look_at_obj_in_light", ("look at {obj} under the {recep}", "examine the {obj} with the {recep}")),
    "pick_two_obj": ("puttwo", "pick_two_obj_and_place", ("put two {obj} in {recep}", "find two {obj} and put them in {recep}")),
}
KEY_BY_PROMPT = {prompt: key for key, (prompt, _, _) in TASK_TYPES.items()}

# -- rooms ----------------------------------------------------------------------------------------------
# receptacles: "type count, ..."; objects: "receptacle n: object, object; ..." (objects of a type are
# numbered in the order they appear here).

ROOMS: dict[int, tuple[str, str]] = {
    901: (
        "countertop 2, cabinet 6, drawer 3, fridge 1, microwave 1, sinkbasin 1, stoveburner 4, diningtable 1, garbagecan 1, coffeemachine 1, toaster 1",
        "diningtable 1: bread, apple, butterknife, saltshaker; countertop 1: mug, spatula, peppershaker; countertop 2: tomato, knife; "
        "fridge 1: lettuce, egg, winebottle; cabinet 2: bowl; cabinet 5: plate; drawer 1: fork, spoon; drawer 3: dishsponge; "
        "stoveburner 2: pan; stoveburner 3: kettle; sinkbasin 1: cup; garbagecan 1: potato",
    ),
    902: (
        "countertop 3, cabinet 10, drawer 5, fridge 1, microwave 1, sinkbasin 1, stoveburner 2, shelf 3, garbagecan 1, coffeemachine 1",
        "countertop 1: potato, bread, ladle; countertop 2: apple, plate; countertop 3: saltshaker, soapbottle; fridge 1: tomato, mug, egg; "
        "cabinet 3: bowl; cabinet 7: cup; cabinet 9: pot; drawer 2: spoon, knife; drawer 4: fork; shelf 1: vase; shelf 2: kettle; "
        "stoveburner 1: pan; microwave 1: egg; coffeemachine 1: mug; sinkbasin 1: spatula",
    ),
    903: (
        "countertop 1, diningtable 2, cabinet 4, drawer 2, fridge 1, microwave 1, sinkbasin 1, stoveburner 4, toaster 1, garbagecan 1",
        "diningtable 1: lettuce, plate, fork, peppershaker; diningtable 2: apple, cup, bread; countertop 1: egg, knife, spatula; "
        "fridge 1: potato, pot, apple; cabinet 1: mug; cabinet 4: bowl; drawer 2: butterknife, ladle; stoveburner 4: pan; "
        "garbagecan 1: tomato",
    ),
    904: (
        "countertop 2, cabinet 8, drawer 4, fridge 1, microwave 1, sinkbasin 2, stoveburner 4, diningtable 1, shelf 2, garbagecan 1, coffeemachine 1, toaster 1",
        "countertop 1: bread, butterknife; countertop 2: mug, winebottle, soapbottle; diningtable 1: tomato, bowl, apple, spoon; "
        "fridge 1: egg, lettuce, cup; cabinet 2: plate; cabinet 6: pot; drawer 1: knife; drawer 3: fork, dishsponge; "
        "shelf 1: saltshaker; shelf 2: peppershaker, vase; stoveburner 3: pan; sinkbasin 2: potato; microwave 1: mug",
    ),
    911: (
        "bed 1, desk 1, drawer 4, shelf 3, sidetable 2, dresser 1, garbagecan 1, laundryhamper 1",
        "desk 1: desklamp, pencil, pen, book; shelf 1: cd, alarmclock; shelf 2: vase; shelf 3: keychain; sidetable 1: cellphone, mug; "
        "sidetable 2: creditcard; drawer 2: cd, pencil; drawer 3: watch; dresser 1: statue, box; bed 1: pillow, laptop; garbagecan 1: pen",
    ),
    912: (
        "bed 1, desk 2, drawer 6, shelf 5, safe 1, sidetable 1, garbagecan 1",
        "desk 1: laptop, cellphone, alarmclock; desk 2: desklamp, book, mug; shelf 1: pencil; shelf 2: cd; shelf 4: bowl, creditcard; "
        "shelf 5: keychain; sidetable 1: pen, cellphone; drawer 1: creditcard; drawer 4: book; drawer 6: cd; safe 1: watch, statue; "
        "bed 1: pillow, remotecontrol; garbagecan 1: newspaper",
    ),
    913: (
        "bed 1, desk 1, drawer 3, shelf 2, sidetable 2, dresser 1, garbagecan 1",
        "sidetable 2: desklamp, alarmclock; desk 1: pen, laptop, cd; shelf 1: book, pencil; shelf 2: statue; sidetable 1: keychain, cellphone; "
        "drawer 1: pen; drawer 3: creditcard, pencil; dresser 1: vase, cellphone, box; bed 1: pillow, book",
    ),
    921: (
        "sofa 1, armchair 2, coffeetable 1, sidetable 3, tvstand 1, drawer 3, cabinet 2, dresser 1, garbagecan 1, shelf 1",
        "sidetable 1: desklamp, keychain; coffeetable 1: remotecontrol, newspaper, statue; sofa 1: pillow, creditcard; "
        "armchair 1: laptop; armchair 2: remotecontrol; tvstand 1: vase, box; sidetable 3: watch, newspaper; drawer 2: keychain; "
        "cabinet 1: statue; dresser 1: creditcard, book; shelf 1: vase; garbagecan 1: newspaper",
    ),
    922: (
        "sofa 2, armchair 1, coffeetable 2, sidetable 2, tvstand 1, drawer 4, cabinet 4, shelf 3, garbagecan 1",
        "sidetable 2: desklamp, watch; coffeetable 1: book, remotecontrol; coffeetable 2: box, keychain; sofa 1: pillow, newspaper; "
        "sofa 2: cellphone; armchair 1: creditcard; tvstand 1: statue; shelf 1: vase; shelf 3: watch, creditcard; drawer 3: keychain; "
        "cabinet 2: vase; cabinet 4: statue",
    ),
    931: (
        "countertop 1, sinkbasin 2, cabinet 4, drawer 2, toilet 1, bathtubbasin 1, towelholder 1, handtowelholder 1, shelf 1, garbagecan 1",
        "countertop 1: soapbottle, spraybottle, candle; toilet 1: toiletpaper, soapbar; cabinet 1: cloth; cabinet 3: toiletpaper, candle; "
        "drawer 1: soapbar; shelf 1: spraybottle; bathtubbasin 1: cloth; towelholder 1: towel; handtowelholder 1: handtowel; "
        "sinkbasin 2: soapbar; garbagecan 1: toiletpaper",
    ),
    932: (
        "countertop 1, sinkbasin 1, cabinet 2, drawer 4, toilet 1, bathtubbasin 1, towelholder 1, shelf 2, garbagecan 1",
        "countertop 1: candle, soapbottle, cloth; toilet 1: spraybottle; cabinet 2: soapbar, candle; drawer 2: cloth; drawer 4: soapbottle; "
        "shelf 1: toiletpaper; shelf 2: candle, spraybottle; towelholder 1: towel; bathtubbasin 1: soapbar",
    ),
    941: (
        "desk 1, shelf 4, drawer 3, sidetable 1, safe 1, garbagecan 1, armchair 1",
        "desk 1: desklamp, laptop, pen; shelf 1: book, cd; shelf 2: pencil, alarmclock; shelf 3: bowl; shelf 4: vase, creditcard; "
        "sidetable 1: cellphone, keychain; drawer 1: pencil, pen; drawer 2: cd; safe 1: watch, cellphone; armchair 1: pillow, book; "
        "garbagecan 1: newspaper",
    ),
    # rooms of the one-shot examples only
    951: (
        "bed 1, desk 1, drawer 2, shelf 3, sidetable 1, garbagecan 1",
        "desk 1: laptop, cd; shelf 1: vase; shelf 2: book, keychain; shelf 3: alarmclock; sidetable 1: desklamp, pen, pencil; drawer 2: keychain",
    ),
    952: (
        "countertop 2, cabinet 4, drawer 2, fridge 1, microwave 1, sinkbasin 1, stoveburner 2, diningtable 1, garbagecan 1",
        "diningtable 1: bread, spoon; countertop 1: knife, saltshaker; countertop 2: ladle, peppershaker; fridge 1: potato, apple; "
        "cabinet 1: plate; cabinet 3: mug; drawer 1: fork; stoveburner 1: pot; sinkbasin 1: bowl; garbagecan 1: egg",
    ),
    953: (
        "sofa 1, armchair 1, coffeetable 1, sidetable 2, tvstand 1, drawer 2, shelf 2, garbagecan 1",
        "sidetable 2: desklamp, remotecontrol; coffeetable 1: newspaper, watch; sofa 1: pillow; armchair 1: keychain; tvstand 1: box; "
        "shelf 1: statue; shelf 2: vase, creditcard; drawer 1: watch",
    ),
}


@dataclass(frozen=True)
class TaskSpec:
    split: str  # dev | test | example
    key: str  # task-type key of the split files
    room: int
    obj: str  # object type (display name)
    recep: str  # goal receptacle type, or the lamp type for look_at_obj
    use: tuple[str, ...] = ()  # instances to use ("apple 2"); default: the first one(s) of the type
    to: str = ""  # the receptacle to put into ("cabinet 3"); default: number 1 of the goal type
    template: int = 0
    detours: tuple[str, ...] = ()  # example games only: commands played first, to show a search
    thought: str = ""  # example games only: the plan in the first reply


TASKS: list[TaskSpec] = [
    # -- put ---------------------------------------------------------------------------------------------
    TaskSpec("dev", "pick_and_place", 911, "pencil", "shelf"),
    TaskSpec("dev", "pick_and_place", 902, "bowl", "countertop", to="countertop 3", template=1),
    TaskSpec("test", "pick_and_place", 912, "cd", "safe"),
    TaskSpec("test", "pick_and_place", 921, "keychain", "dresser", use=("keychain 2",), template=1),
    TaskSpec("test", "pick_and_place", 931, "spraybottle", "toilet"),
    TaskSpec("test", "pick_and_place", 904, "saltshaker", "cabinet", to="cabinet 4", template=1),
    TaskSpec("test", "pick_and_place", 941, "creditcard", "desk"),
    # -- clean -------------------------------------------------------------------------------------------
    TaskSpec("dev", "pick_clean_then_place", 901, "mug", "cabinet", to="cabinet 1"),
    TaskSpec("dev", "pick_clean_then_place", 931, "cloth", "countertop", template=1),
    TaskSpec("test", "pick_clean_then_place", 902, "spoon", "countertop", to="countertop 2"),
    TaskSpec("test", "pick_clean_then_place", 903, "apple", "diningtable", use=("apple 2",), to="diningtable 2", template=1),
    TaskSpec("test", "pick_clean_then_place", 904, "knife", "drawer", to="drawer 2"),
    TaskSpec("test", "pick_clean_then_place", 932, "soapbar", "toilet", template=1),
    TaskSpec("test", "pick_clean_then_place", 901, "pan", "stoveburner", to="stoveburner 1"),
    # -- heat --------------------------------------------------------------------------------------------
    TaskSpec("dev", "pick_heat_then_place", 901, "egg", "countertop", to="countertop 2"),
    TaskSpec("dev", "pick_heat_then_place", 903, "potato", "diningtable", template=1),
    TaskSpec("test", "pick_heat_then_place", 902, "tomato", "countertop", template=1),
    TaskSpec("test", "pick_heat_then_place", 904, "bread", "diningtable"),
    TaskSpec("test", "pick_heat_then_place", 903, "cup", "cabinet", to="cabinet 2", template=1),
    TaskSpec("test", "pick_heat_then_place", 901, "plate", "diningtable"),
    TaskSpec("test", "pick_heat_then_place", 902, "mug", "coffeemachine", use=("mug 2",), template=1),
    # -- cool --------------------------------------------------------------------------------------------
    TaskSpec("dev", "pick_cool_then_place", 901, "apple", "diningtable", template=1),
    TaskSpec("dev", "pick_cool_then_place", 904, "pot", "stoveburner", to="stoveburner 2"),
    TaskSpec("test", "pick_cool_then_place", 902, "pan", "countertop", to="countertop 2"),
    TaskSpec("test", "pick_cool_then_place", 903, "lettuce", "countertop", template=1),
    TaskSpec("test", "pick_cool_then_place", 901, "bread", "countertop", to="countertop 1"),
    TaskSpec("test", "pick_cool_then_place", 904, "tomato", "countertop", to="countertop 1", template=1),
    TaskSpec("test", "pick_cool_then_place", 902, "cup", "shelf", to="shelf 3"),
    # -- examine -----------------------------------------------------------------------------------------
    TaskSpec("dev", "look_at_obj", 911, "cd", "desklamp"),
    TaskSpec("dev", "look_at_obj", 921, "statue", "desklamp", template=1),
    TaskSpec("test", "look_at_obj", 912, "creditcard", "desklamp", use=("creditcard 2",)),
    TaskSpec("test", "look_at_obj", 913, "pencil", "desklamp", template=1),
    TaskSpec("test", "look_at_obj", 922, "watch", "desklamp", use=("watch 2",)),
    TaskSpec("test", "look_at_obj", 941, "alarmclock", "desklamp", template=1),
    TaskSpec("test", "look_at_obj", 913, "box", "desklamp"),
    # -- puttwo ------------------------------------------------------------------------------------------
    TaskSpec("dev", "pick_two_obj", 912, "cellphone", "bed"),
    TaskSpec("dev", "pick_two_obj", 931, "toiletpaper", "cabinet", to="cabinet 2", template=1),
    TaskSpec("test", "pick_two_obj", 921, "newspaper", "sofa"),
    TaskSpec("test", "pick_two_obj", 941, "pencil", "desk", template=1),
    TaskSpec("test", "pick_two_obj", 922, "vase", "tvstand"),
    TaskSpec("test", "pick_two_obj", 913, "pen", "shelf", to="shelf 2", template=1),
    TaskSpec("test", "pick_two_obj", 932, "candle", "countertop"),
    # -- one-shot examples (prompts.json) ----------------------------------------------------------------
    TaskSpec("example", "pick_and_place", 951, "pencil", "desk", detours=("go to shelf 1", "go to sidetable 1"), template=1,
             thought="To finish, I must find a pencil and put it on the desk. Pencils tend to sit on shelves, tables or in drawers, so I will look there one place at a time."),
    TaskSpec("example", "pick_clean_then_place", 952, "bowl", "cabinet", to="cabinet 2", detours=("go to countertop 1",),
             thought="I need a bowl, then clean it in the sinkbasin, then put it in a cabinet. Bowls are often on countertops, in cabinets or in the sinkbasin; I will begin with countertop 1."),
    TaskSpec("example", "pick_heat_then_place", 952, "egg", "diningtable", detours=("go to fridge 1", "go to countertop 2"), template=1,
             thought="I have to find an egg, heat it with the microwave, and then put it on the diningtable. An egg is probably in the fridge or on a countertop, so I will check those first."),
    TaskSpec("example", "pick_cool_then_place", 952, "plate", "countertop", to="countertop 2", detours=("go to diningtable 1", "go to countertop 1"),
             thought="The goal asks for a cool plate on a countertop. I will look for a plate on the tables first, cool it in the fridge, and then put it on a countertop."),
    TaskSpec("example", "look_at_obj", 953, "watch", "desklamp", use=("watch 1",), detours=("go to sidetable 1",), template=1,
             thought="I need to pick up a watch and then switch on the desklamp while holding it. A watch could lie on a table, so I will search the tables and then find the lamp."),
    TaskSpec("example", "pick_two_obj", 951, "keychain", "shelf", to="shelf 3", use=("keychain 1", "keychain 2"), detours=("go to desk 1",),
             thought="Two keychains have to end up on a shelf. I will search the furniture for the first one, put it on a shelf, and then search for the second."),
]

# -- world model ------------------------------------------------------------------------------------------


@dataclass
class Thing:
    kind: str  # display type ("apple")
    number: int  # display number
    pddl_id: str
    where: str = ""  # receptacle display name ("countertop 1"), objects only

    @property
    def name(self) -> str:
        return f"{self.kind} {self.number}"


class Room:
    """One room: receptacles, objects and their PDDL ids (numbered as ALFWorld's demangler numbers them)."""

    def __init__(self, number: int, receptacles: str, objects: str) -> None:
        self.number = number
        self.receptacles: list[Thing] = []
        for item in receptacles.split(","):
            kind, count = item.split()
            for k in range(1, int(count) + 1):
                self.receptacles.append(Thing(kind, k, _pddl_id(kind, k, int(count))))
        placements: list[tuple[str, str]] = []
        for group in objects.split(";"):
            where, _, items = group.partition(":")
            placements += [(where.strip(), item.strip()) for item in items.split(",")]
        totals: dict[str, int] = {}
        for _, kind in placements:
            totals[kind] = totals.get(kind, 0) + 1
        seen: dict[str, int] = {}
        self.objects: list[Thing] = []
        names = {r.name for r in self.receptacles}
        for where, kind in placements:
            if where not in names:
                raise SystemExit(f"room {number}: no receptacle {where!r} for {kind}")
            if kind not in TYPE_NAMES:
                raise SystemExit(f"room {number}: unknown object type {kind!r}")
            seen[kind] = seen.get(kind, 0) + 1
            self.objects.append(Thing(kind, seen[kind], _pddl_id(kind, seen[kind], totals[kind]), where))

    def receptacle(self, name: str) -> Thing:
        for r in self.receptacles:
            if r.name == name:
                return r
        raise SystemExit(f"room {self.number}: no receptacle {name!r}")

    def object(self, name: str) -> Thing:
        for o in self.objects:
            if o.name == name:
                return o
        raise SystemExit(f"room {self.number}: no object {name!r}")

    def of_kind(self, kind: str) -> list[Thing]:
        return [o for o in self.objects if o.kind == kind]


def _pddl_id(kind: str, number: int, count: int) -> str:
    """An id the demangler shows as ``<kind> <number>``: it numbers ids of one name in reverse sorted order."""
    type_name = TYPE_NAMES[kind]
    suffix = f"{count - number:02d}"
    if kind.endswith("basin"):  # the demangler appends "basin" to the part before "_bar_"
        return f"{type_name[: -len('Basin')]}_bar_{suffix}_bar_{type_name}"
    return f"{type_name}_bar_{suffix}"


def _location(thing: Thing) -> str:
    # no "basin" in a location id: ALFWorld's demangler appends "basin" to the name of any id containing it, so
    # loc_bar_sinkbasin_1 was shown as "You arrive at locbasin 1." (which the observation clean-up does not cut)
    return f"loc_bar_{thing.kind.removesuffix('basin')}_{thing.number}"


def pddl_problem(name: str, room: Room, spec: TaskSpec) -> str:
    obj_types = sorted({TYPE_NAMES[o.kind] for o in room.objects})
    rec_types = sorted({TYPE_NAMES[r.kind] for r in room.receptacles})
    facts = ["(atLocation agent1 loc_bar_start)"]
    for r in room.receptacles:
        facts.append(f"(receptacleType {r.pddl_id} {TYPE_NAMES[r.kind]}Type)")
        facts.append(f"(receptacleAtLocation {r.pddl_id} {_location(r)})")
        if r.kind in OPENABLE:
            facts.append(f"(openable {r.pddl_id})")
    by_name = {r.name: r for r in room.receptacles}
    for o in room.objects:
        holder = by_name[o.where]
        facts += [
            f"(objectType {o.pddl_id} {TYPE_NAMES[o.kind]}Type)",
            f"(inReceptacle {o.pddl_id} {holder.pddl_id})",
            f"(objectAtLocation {o.pddl_id} {_location(holder)})",
        ]
        if o.kind not in LAMPS:
            facts.append(f"(pickupable {o.pddl_id})")
        for capability, kinds in (("cleanable", CLEANABLE), ("heatable", HEATABLE), ("coolable", COOLABLE),
                                  ("sliceable", SLICEABLE), ("isReceptacleObject", RECEPTACLE_OBJECTS), ("toggleable", LAMPS)):  # fmt: skip
            if o.kind in kinds:
                facts.append(f"({capability} {o.pddl_id})")
    kinds_here = {o.kind for o in room.objects}
    for rec_type in sorted({r.kind for r in room.receptacles}):
        for kind in sorted(CAN_CONTAIN[rec_type] & kinds_here):
            facts.append(f"(canContain {TYPE_NAMES[rec_type]}Type {TYPE_NAMES[kind]}Type)")
    objects = (
        ["agent1 - agent"]
        + [" ".join(f"{t}Type" for t in obj_types) + " - otype", " ".join(f"{t}Type" for t in rec_types) + " - rtype"]
        + [" ".join(o.pddl_id for o in room.objects) + " - object", " ".join(r.pddl_id for r in room.receptacles) + " - receptacle"]
        + [" ".join(["loc_bar_start", *(_location(r) for r in room.receptacles)]) + " - location"]
    )
    lines = [f"(define (problem {name})", "  (:domain alfred)", "  (:objects"]
    lines += [f"    {line}" for line in objects]
    lines += ["  )", "  (:init"]
    lines += [f"    {fact}" for fact in facts]
    lines += ["  )", f"  (:goal {_goal(spec)})", ")", ""]
    return "\n".join(lines)


def _goal(spec: TaskSpec) -> str:
    obj, recep = TYPE_NAMES[spec.obj], TYPE_NAMES[spec.recep]
    if spec.key == "look_at_obj":
        return (
            f"(and (exists (?ot - object ?r - receptacle ?a - agent ?l - location) (and (objectType ?ot {recep}Type) "
            "(toggleable ?ot) (isToggled ?ot) (receptacleAtLocation ?r ?l) (atLocation ?a ?l) (inReceptacle ?ot ?r))) "
            f"(exists (?o - object ?a - agent) (and (objectType ?o {obj}Type) (holds ?a ?o))))"
        )
    if spec.key == "pick_two_obj":
        return (
            f"(exists (?r - receptacle ?o1 - object) (and (objectType ?o1 {obj}Type) (receptacleType ?r {recep}Type) "
            f"(inReceptacle ?o1 ?r) (exists (?o2 - object) (and (not (= ?o1 ?o2)) (objectType ?o2 {obj}Type) (inReceptacle ?o2 ?r)))))"
        )
    state = {"pick_clean_then_place": "(cleanable ?o) (isClean ?o) ", "pick_heat_then_place": "(heatable ?o) (isHot ?o) ",
             "pick_cool_then_place": "(coolable ?o) (isCool ?o) "}.get(spec.key, "")  # fmt: skip
    return (
        f"(exists (?r - receptacle ?o - object) (and {state}(objectType ?o {obj}Type) (receptacleType ?r {recep}Type) "
        "(inReceptacle ?o ?r)))"
    )


class _Walker:
    """Writes a walkthrough: tracks where the agent is and which receptacles it opened."""

    def __init__(self, room: Room) -> None:
        self.room = room
        self.at = ""
        self.opened: set[str] = set()
        self.commands: list[str] = []

    def go(self, receptacle: str) -> None:
        if self.at != receptacle:
            self.commands.append(f"go to {receptacle}")
            self.at = receptacle

    def open_here(self) -> None:
        if self.at.split()[0] in OPENABLE and self.at not in self.opened:
            self.commands.append(f"open {self.at}")
            self.opened.add(self.at)

    def take(self, thing: Thing) -> None:
        self.go(thing.where)
        self.open_here()
        self.commands.append(f"take {thing.name} from {thing.where}")

    def put(self, thing: Thing, receptacle: str) -> None:
        self.go(receptacle)
        self.open_here()
        self.commands.append(f"put {thing.name} in/on {receptacle}")

    def treat(self, thing: Thing, verb: str, appliance: str) -> None:
        target = f"{appliance} 1"
        self.go(target)
        self.commands.append(f"{verb} {thing.name} with {target}")


def walkthrough(room: Room, spec: TaskSpec) -> list[str]:
    walker = _Walker(room)
    for detour in spec.detours:
        walker.commands.append(detour)
        walker.at = detour.removeprefix("go to ")
    wanted = [room.object(name) for name in spec.use] or room.of_kind(spec.obj)[: 2 if spec.key == "pick_two_obj" else 1]
    if spec.key == "look_at_obj":
        lamp = room.of_kind(spec.recep)[0]
        walker.take(wanted[0])
        walker.go(lamp.where)
        walker.commands.append(f"use {lamp.name}")
        return walker.commands
    target = spec.to or f"{spec.recep} 1"
    room.receptacle(target)
    walker.take(wanted[0])
    treatment = {"pick_clean_then_place": ("clean", "sinkbasin"), "pick_heat_then_place": ("heat", "microwave"),
                 "pick_cool_then_place": ("cool", "fridge")}.get(spec.key)  # fmt: skip
    if treatment:
        walker.treat(wanted[0], *treatment)
    walker.put(wanted[0], target)
    if spec.key == "pick_two_obj":
        walker.take(wanted[1])
        walker.put(wanted[1], target)
    return walker.commands


# -- files ------------------------------------------------------------------------------------------------


def task_text(spec: TaskSpec) -> str:
    template = TASK_TYPES[spec.key][2][spec.template]
    return template.format(obj=spec.obj, recep=spec.recep)


def folder_name(spec: TaskSpec) -> str:
    return f"{TASK_TYPES[spec.key][1]}-{TYPE_NAMES[spec.obj]}-None-{TYPE_NAMES[spec.recep]}-{spec.room}"


def game_data(spec: TaskSpec, domain: str, grammar: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    room = Room(spec.room, *ROOMS[spec.room])
    kinds = {o.kind for o in room.objects}
    if spec.obj not in kinds or (spec.key != "look_at_obj" and spec.obj not in CAN_CONTAIN[spec.recep]):
        raise SystemExit(f"{name}: the goal receptacle {spec.recep} cannot hold {spec.obj} (or there is none)")
    text = task_text(spec)
    game = {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", text),
        "pddl_problem": pddl_problem(name, room, spec),
        "solvable": True,
        "walkthrough": walkthrough(room, spec),
    }
    lamp = spec.key == "look_at_obj"
    traj = {
        "task_type": TASK_TYPES[spec.key][1],
        "pddl_params": {
            "object_target": TYPE_NAMES[spec.obj],
            "parent_target": "" if lamp else TYPE_NAMES[spec.recep],
            "toggle_target": TYPE_NAMES[spec.recep] if lamp else "",
            "mrecep_target": "",
            "object_sliced": False,
        },
        "scene": {"room": spec.room, "source": "agentbench-async built-in suite"},
        "turk_annotations": {"anns": [{"task_desc": text}]},
    }
    return game, traj


def _play(game: dict[str, Any], name: str) -> list[tuple[str, str]]:
    """Play the walkthrough in TextWorld; return (command, observation) pairs; fail unless it wins at the end."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

    env = textworld.envs.pddl.PddlEnv(textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"]))
    env = AlfredInfos(AlfredDemangler(env, shuffle=False))
    env.load(game)
    state = env.reset()
    played = [("", state["feedback"])]
    for i, command in enumerate(game["walkthrough"]):
        if command not in state["admissible_commands"]:
            raise SystemExit(f"{name}: step {i + 1} {command!r} is not admissible; admissible: {state['admissible_commands']}")
        if state["won"]:
            raise SystemExit(f"{name}: won before step {i + 1}")
        state, _, done = env.step(command)
        played.append((command, state["feedback"]))
    if not state["won"]:
        raise SystemExit(f"{name}: the walkthrough does not win")
    env.close()
    return played


def example_turns(spec: TaskSpec, played: list[tuple[str, str]]) -> list[str]:
    """The example in AgentBench's prompt-file shape: environment and agent turns, alternating."""
    from agentbench_async.envs.alfworld.prompts import first_observation, step_observation

    turns = [first_observation(played[0][1]) + "\n"]
    for i, (command, observation) in enumerate(played[1:]):
        turns.append((f"THOUGHT: {spec.thought}\n ACTION: {command}\n") if i == 0 else f"ACTION: {command}\n")
        turns.append(step_observation(observation) + "\n")
    turns.append("ACTION: Task complete.\n")
    return turns


def build(play: bool = True) -> dict[str, str]:
    """Every output file (path relative to this folder -> text). ``play``: check each walkthrough wins
    (examples are always played: their observations come from the engine)."""
    from agentbench_async.envs.alfworld.logic import load_logic_211

    domain, grammar = load_logic_211()
    files: dict[str, str] = {}
    splits: dict[str, dict[str, list[str]]] = {s: {key: [] for key in TASK_TYPES} for s in ("dev", "test")}
    examples: dict[str, list[str]] = {}
    counters: dict[str, int] = {}
    for spec in TASKS:
        counters[spec.split] = counters.get(spec.split, 0) + 1
        trial = f"trial_{spec.split}_{counters[spec.split]:03d}"
        name = f"{folder_name(spec)}/{trial}"
        game, traj = game_data(spec, domain, grammar, f"{spec.split}_{counters[spec.split]:03d}")
        if spec.split == "example":
            examples[TASK_TYPES[spec.key][0]] = example_turns(spec, _play(game, name))
            continue
        if play:
            _play(game, name)
        base = f"games/{spec.split}/{name}"
        files[f"{base}/game.tw-pddl"] = json.dumps(game, indent=2) + "\n"
        files[f"{base}/traj_data.json"] = json.dumps(traj, indent=2) + "\n"
        splits[spec.split][spec.key].append(f"{base}/game.tw-pddl")
    for split, content in splits.items():
        files[f"{split}.json"] = json.dumps(content, indent=2) + "\n"
    files["prompts.json"] = json.dumps({k: examples[k] for k in ("put", "clean", "heat", "cool", "puttwo", "examine")}, indent=2) + "\n"
    return files


def main() -> None:
    files = build()
    stale = [p for p in HERE.joinpath("games").rglob("*") if p.is_file() and str(p.relative_to(HERE)) not in files]
    for path in stale:
        path.unlink()
    for rel, text in files.items():
        path = HERE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for folder in sorted(HERE.joinpath("games").rglob("*"), reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    counts = {s: sum(1 for r in files if r.startswith(f"games/{s}/") and r.endswith(".tw-pddl")) for s in ("dev", "test")}
    print(f"wrote {len(files)} files: dev {counts['dev']} games, test {counts['test']} games, prompts.json", file=sys.stderr)


if __name__ == "__main__":
    main()
