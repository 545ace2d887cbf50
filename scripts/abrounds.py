"""What scripts/ab-hotpath.py and scripts/ab-pipeline.py share: the old/new
arguments and the rounds that alternate the two builds, so that neither
always runs second on a machine that drifts."""
import argparse
import sys


def parser(rounds):
    """An argument parser with the two test binaries and --rounds (default rounds)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=rounds)
    return ap


def alternate(a, run):
    """Calls run(binary) for a.old and a.new in each of a.rounds rounds (new
    first in odd rounds) and returns {"old": [results], "new": [results]}."""
    runs = {"old": [], "new": []}
    for r in range(a.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        for which in order:
            print(f"round {r + 1}: {which}", file=sys.stderr)
            runs[which].append(run(getattr(a, which)))
    return runs
