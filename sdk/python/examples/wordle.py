#!/usr/bin/env python3
"""Wordle as a prorl plugin in Python, with per-rollout state: the reward
comes from the guesses the tool saw, never from what the model claims."""

import string
from collections import Counter
from dataclasses import dataclass, field
from typing import Annotated

import prorl_sdk as sdk


@dataclass
class Config:
    max_guesses: Annotated[int, sdk.Field("Guesses allowed per game.", minimum=1, maximum=20)] = 6


@dataclass
class Task:
    answer: str

    def check(self) -> None:
        if len(self.answer) != 5 or set(self.answer) - set(string.ascii_lowercase):
            raise sdk.InvalidTask("answer", f"must be five lower-case letters, got {self.answer!r}")


@dataclass
class Game:
    guesses: list[str] = field(default_factory=list)
    solved: bool = False


Rollout = sdk.Rollout[Config, Task, Game]
env = sdk.Env[Config, Task, Game](
    "wordle", "0.1.0", description="Guess the five-letter word from clues.", config=Config(), task=Task, state=Game
)


def clues(guess: str, answer: str) -> str:
    """G (right place), Y (elsewhere in the word, as often as it occurs there) or -."""
    out = ["G" if g == a else "-" for g, a in zip(guess, answer, strict=True)]
    left = Counter(a for g, a in zip(guess, answer, strict=True) if g != a)
    for i, g in enumerate(guess):
        if out[i] != "G" and left[g] > 0:
            out[i], left[g] = "Y", left[g] - 1
    return "".join(out)


@env.tool
def guess(r: Rollout, word: Annotated[str, "A five-letter word."]) -> str:
    """Guess the word; the clue marks each letter G (right place), Y (elsewhere) or - (absent)."""
    w, g = word.strip().lower(), r.state
    if g.solved:
        raise ValueError("the game is over: you solved it")
    if len(g.guesses) >= r.config.max_guesses:
        raise ValueError(f"no guesses left ({len(g.guesses)} used)")
    if len(w) != 5 or set(w) - set(string.ascii_lowercase):
        raise ValueError(f"{word!r} is not five letters")
    g.guesses.append(w)
    if w == r.task.answer:
        g.solved = True
        r.finish(w)
        return "GGGGG: solved!"
    return f"{clues(w, r.task.answer)} ({r.config.max_guesses - len(g.guesses)} guesses left)"


@env.episode
def episode(r: Rollout) -> sdk.Episode:
    q = f"Find the hidden five-letter word in at most {r.config.max_guesses} guesses with the guess tool."
    return sdk.Episode(sdk.chat("You play Wordle.", q), limits=sdk.Limits(max_turns=r.config.max_guesses + 2))


@env.score
def score(r: Rollout, req: sdk.EvaluateRequest) -> sdk.Score:
    n, g = len(r.state.guesses), r.state
    reward = 1 - 0.5 * (n - 1) / r.config.max_guesses if g.solved else 0.0  # fewer guesses, more reward
    return sdk.Score(reward, resolved=g.solved, metrics={"guesses": n}, info={"guesses": g.guesses})


if __name__ == "__main__":
    sdk.serve(env)
