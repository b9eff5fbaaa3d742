"""Guess the number: find a whole number from 1 to 100 in at most 7 guesses, told Higher or Lower.

Run it: agentbench run --env docs/examples/guess_number.py --model MODEL --base-url URL --out runs/guess.duckdb
Try it with the mock model: agentbench demo --env docs/examples/guess_number.py
"""

import re

NAME = "guess_number"
MAX_TURNS = 7
TASKS = [{"id": f"n{i:02d}", "secret": (i * 37 + 11) % 100 + 1} for i in range(20)]
BEHAVIOUR_CHECKS = {"stalled": 0}  # "Higher." again is news here: no episode is called stalled for it
RULES = "I am thinking of a whole number from 1 to 100. Guess it: reply with one number. I will say Higher or Lower."


def prompt(task):
    return RULES


def step(task, state, reply):
    numbers = re.findall(r"-?\d+", reply)
    if not numbers:
        return "Reply with one whole number from 1 to 100."
    guess = int(numbers[-1])
    state["found"] = guess == task["secret"]
    if state["found"]:
        return None  # the episode is over: score() grades it
    return "Higher." if guess < task["secret"] else "Lower."


def score(task, state):
    return state.get("found", False)


def oracle(task, messages):  # the mock model's player that always wins: a binary search
    low, high = 1, 100
    for m in messages:
        if m["role"] == "assistant":
            guess = int(m["content"])
        elif m["content"] in ("Higher.", "Lower."):
            low, high = (guess + 1, high) if m["content"] == "Higher." else (low, guess - 1)
    return str((low + high) // 2)


def weak(task, messages):  # guesses upwards from 1: wins only when the number is small
    return str(sum(m["role"] == "assistant" for m in messages) + 1)
