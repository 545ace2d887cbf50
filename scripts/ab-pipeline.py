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

--cpu measures what the code itself costs instead of the wall clock: each row
runs in a process of its own (pipeline and reference separately) with a fixed
request count (--mb of batches, at most --sync-requests on the flush=always
rows), after sync and, where the kernel lets us, a drop of clean page cache,
and the child's rusage gives user and system CPU per request. On a page-cache
row the wall clock mostly measures the kernel's writeback of earlier rows and
earlier runs, which the two builds do not control; user CPU is their own work.
"""
import os
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


ROW = re.compile(r"^mode=(\w+)/flush=(\w+)/batch=(\d+)(KiB|MiB)$")


def settle():
    """Writes back dirty pages and drops clean ones, so that each process
    starts from the same page cache (skipped where /proc does not allow it)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1")
    except OSError:
        pass


def cpu_process(binary, pattern, count):
    """One process running the sub-benchmark pattern count times: its user
    and system CPU seconds."""
    settle()
    proc = subprocess.Popen([binary, "-test.run", "^$", "-test.bench", pattern,
                             "-test.benchtime", f"{count}x", "-test.timeout", "60m"],
                            stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, ru = os.wait4(proc.pid, 0)
    if status != 0 or "ns/op" not in out:
        raise SystemExit(f"{binary} {pattern}: failed:\n{out[-2000:]}")
    print(next(line for line in out.splitlines() if "ns/op" in line), file=sys.stderr)
    return ru.ru_utime, ru.ru_stime


def cpu_run(binary, bench, sub, count):
    """(user, system) CPU microseconds per request of one sub-benchmark: a
    process that runs it count times less one that runs it once, over the
    count-1 requests between them, so that start-up and set-up cancel."""
    pattern = f"^{bench}$/" + "/".join(f"^{re.escape(level)}$" for level in sub.split("/"))
    u1, s1 = cpu_process(binary, pattern, 1)
    un, sn = cpu_process(binary, pattern, count)
    d = max(count - 1, 1)
    return max(un - u1, 0) * 1e6 / d, max(sn - s1, 0) * 1e6 / d


def cpu_main(a):
    rows = []
    for line in subprocess.run([a.new, "-test.run", "^$", "-test.bench", "^BenchmarkPipeline$",
                                "-test.benchtime", "1x"], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        m = LINE.match(line)
        if m and re.search(a.rows, m.group(2)) and ROW.match(m.group(2)):
            rows.append(m.group(2))
    counts = {}
    for sub in rows:
        m = ROW.match(sub)
        size = int(m.group(3)) << (10 if m.group(4) == "KiB" else 20)
        n = max(1, (a.mb << 20) // size)
        counts[sub] = max(2, min(n, a.sync_requests) if m.group(2) == "always" else n)

    def one(binary):
        return {sub: (cpu_run(binary, "BenchmarkPipeline", sub, counts[sub]),
                      cpu_run(binary, "BenchmarkReference", ref_key(sub), counts[sub])) for sub in rows}

    runs = abrounds.alternate(a, one)
    # Linux measures a process's CPU time exactly but splits it into user
    # and system by sampling at each tick, so the total is the figure to judge;
    # the user share is shown beside it.
    print("| row | requests | old CPU µs/req | new CPU µs/req | new/old speed (CPU) | "
          "new/old, reference-normalised | old user share | new user share | rounds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for sub in rows:
        pairs = [(o[sub], n[sub]) for o, n in zip(runs["old"], runs["new"])]

        def total(x):
            return x[0] + x[1]
        oc = statistics.median(total(o[0]) for o, _ in pairs)
        nc = statistics.median(total(n[0]) for _, n in pairs)
        ratio = statistics.median(total(o[0]) / total(n[0]) for o, n in pairs)
        normed = statistics.median((total(o[0]) / total(o[1])) / (total(n[0]) / total(n[1])) for o, n in pairs)
        ou = statistics.median(o[0][0] / total(o[0]) for o, _ in pairs)
        nu = statistics.median(n[0][0] / total(n[0]) for _, n in pairs)
        print(f"| {sub} | {counts[sub]} | {oc:.1f} | {nc:.1f} | {ratio:.2f} | {normed:.2f} | "
              f"{ou:.2f} | {nu:.2f} | {len(pairs)} |")


def ref_key(sub):
    # BenchmarkReference's rows drop the mode: mode=verbatim/flush=x/batch=y -> flush=x/batch=y.
    return re.sub(r"^mode=\w+/", "", sub)


def main():
    ap = abrounds.parser(rounds=15)
    ap.add_argument("--rows", default=r"^mode=\w+/flush=\w+/batch=\w+$")
    ap.add_argument("--benchtime", default="1s")
    ap.add_argument("--cpu", action="store_true", help="CPU per request, one process per row (see above)")
    ap.add_argument("--mb", type=int, default=256, help="--cpu: MiB of batches per row and process")
    ap.add_argument("--sync-requests", type=int, default=1000, help="--cpu: at most this many requests on flush=always rows")
    a = ap.parse_args()
    if a.cpu:
        cpu_main(a)
        return
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
