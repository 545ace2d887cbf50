#!/usr/bin/env python3
"""Before/after comparison of chosen hot-path pipeline rows between two builds.

    go test -c -o old.test ./hotpath    # at the old commit
    go test -c -o new.test ./hotpath    # at the new commit
    scripts/ab-pipeline.py old.test new.test [--rounds 15] [--rows REGEX] [--benchtime 1s]

The hot-path report (scripts/ab-hotpath.py) always runs every row; this runs
only the BenchmarkPipeline sub-benchmarks whose name matches --rows (default:
the rows with a real file under them), and BenchmarkReference's same rows,
alternating old/new in each round (new first in odd rounds). Both binaries
have both benchmarks with the same names. Per row it prints the median over
the rounds of new/old ns per request, and of the same ratio normalised by the
reference each binary measured in its own run (the machine's drift between
the two runs cancels out). Raw benchmark lines go to stderr.

Sub-benchmark names repeat for the rows without a disk (Go adds "#01"): the
rows without the suffix are the ones on a real file.
"""
import re
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True  # abrounds sits beside this script: no __pycache__ in the tree
import abrounds  # noqa: E402

LINE = re.compile(r"^(Benchmark\w+)/(\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op")


def run(binary, rows, benchtime):
    out = subprocess.run(
        [binary, "-test.run", "^$", "-test.bench", "^Benchmark(Pipeline|Reference)$",
         "-test.benchtime", benchtime, "-test.timeout", "60m"],
        check=True, capture_output=True, text=True).stdout
    pipe, ref = {}, {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        name, sub, ns = m.group(1), m.group(2), float(m.group(4))
        if name == "BenchmarkPipeline":
            if re.search(rows, sub):
                print(line, file=sys.stderr)
                pipe[sub] = ns
        elif name == "BenchmarkReference":
            ref[sub] = ns
    if not pipe:
        raise SystemExit(f"{binary}: no pipeline rows matching {rows!r}:\n{out[-2000:]}")
    return pipe, ref


def ref_key(sub):
    # BenchmarkReference's rows drop the mode: mode=verbatim/flush=x/batch=y -> flush=x/batch=y.
    return re.sub(r"^mode=\w+/", "", sub)


def main():
    ap = abrounds.parser(rounds=15)
    ap.add_argument("--rows", default=r"^mode=\w+/flush=\w+/batch=\w+$")
    ap.add_argument("--benchtime", default="1s")
    a = ap.parse_args()
    runs = abrounds.alternate(a, lambda binary: run(binary, a.rows, a.benchtime))
    print("| row | old ns/req | new ns/req | new/old speed | new/old speed, reference-normalised | rounds |")
    print("|---|---:|---:|---:|---:|---:|")
    for sub in runs["new"][0][0]:
        pairs = [(o, n) for o, n in zip(runs["old"], runs["new"]) if sub in o[0] and sub in n[0]]
        speed = statistics.median(o[0][sub] / n[0][sub] for o, n in pairs)
        normed = [(o[0][sub] / o[1][ref_key(sub)]) / (n[0][sub] / n[1][ref_key(sub)])
                  for o, n in pairs if ref_key(sub) in o[1] and ref_key(sub) in n[1]]
        om = statistics.median(o[0][sub] for o, _ in pairs)
        nm = statistics.median(n[0][sub] for _, n in pairs)
        ns = f"{statistics.median(normed):.2f}" if normed else "-"
        print(f"| {sub} | {om:.0f} | {nm:.0f} | {speed:.2f} | {ns} | {len(pairs)} |")


if __name__ == "__main__":
    main()
