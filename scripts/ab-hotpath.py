#!/usr/bin/env python3
"""Before/after comparison of the hot-path report between two builds.

    go test -c -o old.test ./hotpath    # at the old commit
    go test -c -o new.test ./hotpath    # at the new commit
    scripts/ab-hotpath.py old.test new.test [--rounds 5]

Runs BenchmarkHotpathReport of each test binary with one round per run,
alternating old/new (new first in odd rounds), and prints per row the median
of the per-round ratios new/old of the wall ratio and of the CPU ratio (each
already normalised by the reference measured in the same run), plus the
median hot-path MB/s of each build. Raw report rows go to stderr.
"""
import os
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True  # abrounds sits beside this script: no __pycache__ in the tree
import abrounds  # noqa: E402


def run(binary):
    env = dict(os.environ, HOTPATH_ROUNDS="1")
    out = subprocess.run(
        [binary, "-test.run", "^$", "-test.bench", "^BenchmarkHotpathReport$", "-test.benchtime", "1x",
         "-test.timeout", "30m"],
        env=env, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 10 or cells[0] not in ("normal", "verbatim"):
            continue
        print(line, file=sys.stderr)
        key = (cells[0], cells[1], cells[2])
        rows[key] = {"mbps": float(cells[4]), "wall": float(cells[5]), "cpu": float(cells[8])}
    if not rows:
        raise SystemExit(f"{binary}: no report rows in its output:\n{out[-2000:]}")
    return rows


def main():
    a = abrounds.parser(rounds=5).parse_args()
    runs = abrounds.alternate(a, run)
    print(f"| mode | flush | batch | old MB/s | new MB/s | new/old wall ratio | new/old CPU ratio | rounds |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for key in runs["new"][0]:
        pairs = [(o[key], n[key]) for o, n in zip(runs["old"], runs["new"]) if key in o and key in n]
        wall = statistics.median(n["wall"] / o["wall"] for o, n in pairs)
        cpu = statistics.median(n["cpu"] / o["cpu"] for o, n in pairs)
        om = statistics.median(o["mbps"] for o, _ in pairs)
        nm = statistics.median(n["mbps"] for _, n in pairs)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {om:.0f} | {nm:.0f} | {wall:.2f} | {cpu:.2f} | {len(pairs)} |")


if __name__ == "__main__":
    main()
