"""Before and after: the same benchmarks on two checkouts of durablelab, in alternating
rounds, and every figure's after ÷ before.

    git worktree add --detach ../before COMMIT                         # the tree before
    .venv/bin/python bench/before_after.py ../before .                  # 3 rounds, full modes
    .venv/bin/python bench/before_after.py ../before . --keep DIR       # keep the outputs
    .venv/bin/python bench/before_after.py --read DIR                   # report on kept ones
    .venv/bin/python bench/before_after.py --quick                      # CI: this checkout
                                                     # against itself, engine only, 1 round

BEFORE and AFTER are source trees (default: this checkout, so a run against itself shows
how far the ratios stray by noise alone). Each
tree's own bench/bench_engine.py and bench/peers.py run in a child process with PYTHONPATH
set to that tree, so each measures its own package; rows are matched by figure and label,
and a row only one side printed is listed apart. Rounds alternate the order (before, after,
then after, before) so a slow patch of a shared machine falls on both sides. A change to a
script itself between the trees is a change in what is measured: it is said.

For each row: the median over rounds of each side's median; after ÷ before of those, and of
the "× baseline" column (each figure divided by a plain call of `step(i)` timed in the same
process), as the median of the per-round ratios with their spread; and "best": the fastest
sample of all rounds after ÷ the fastest before. Load from other processes only ever adds
time, so on a busy machine the best is the steadiest guide to what the code costs, and the
per-round spread of rows whose code did not change (a peer's) shows the noise. Nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPTS = {"engine": "bench_engine.py", "peers": "peers.py"}
UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


def number(text: str) -> float | None:
    """A table cell as a number: "6.13 µs" in seconds, "43" or "429,735" as is."""
    text = text.strip()
    match = re.fullmatch(r"([\d.,]+)\s*(s|ms|µs|ns)?", text)
    if not match:
        return None
    value = float(match.group(1).replace(",", ""))
    return value * UNITS[match.group(2)] if match.group(2) else value


def parse(text: str) -> dict[tuple, tuple]:
    """The rows of every table `bench_engine.render` printed: (figure, label, unit) ->
    (median, min, median × baseline or None). Columns are read by the spans of the dashes under
    the header, so labels may hold single spaces and commas."""
    rows: dict[tuple, tuple] = {}
    spans = None
    for line in text.splitlines():
        if re.match(r"^-  -+  ", line):
            spans = [m.span() for m in re.finditer(r"-+", line)]
            continue
        if spans is None or not line.strip():
            continue
        if not re.match(r"^\w+\s{2}", line):
            spans = None   # the table ended
            continue
        cells = [line[a:b if i < len(spans) - 1 else None].strip()
                 for i, (a, b) in enumerate(spans)]
        if len(cells) < 6:
            continue
        figure, label, unit, median, least = (cells[0], cells[1], cells[2], number(cells[3]),
                                              number(cells[4]))
        ratio = number(cells[6].split("[")[0]) if len(cells) > 6 and cells[6] else None
        if median is not None:
            rows[(figure, label, unit)] = (median, least, ratio)
    return rows


def run_round(tree: Path, script: str, quick: bool, out: Path) -> None:
    command = [sys.executable, str(tree / "bench" / script)] + (["--quick"] if quick else [])
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with open(out, "w") as f:
        proc = subprocess.run(command, cwd=tempfile.gettempdir(), env=env, stdout=f,
                              stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} (PYTHONPATH={tree}) exited {proc.returncode}; "
                         f"its output is in {out}")


def outputs(folder: Path, bench: str, side: str) -> list[Path]:
    return sorted(folder.glob(f"{bench}-{side}-*.txt"),
                  key=lambda p: int(p.stem.rsplit("-", 1)[1]))


def spread(ratios: list[float]) -> str:
    if not ratios:
        return "–"
    return (f"{statistics.median(ratios):.3f} "
            f"[{min(ratios):.3f}–{max(ratios):.3f}]")


def plain(x: float) -> str:
    return f"{x:.4g}"


def report(folder: Path, benches) -> list[str]:
    out = []
    for bench in benches:
        before = [parse(p.read_text()) for p in outputs(folder, bench, "before")]
        after = [parse(p.read_text()) for p in outputs(folder, bench, "after")]
        if not before or not after:
            out.append(f"{SCRIPTS[bench]}: no outputs for both sides in {folder}")
            continue
        pairs = list(zip(before, after))
        out += ["", f"{SCRIPTS[bench]}: {len(pairs)} round{'s' if len(pairs) > 1 else ''}; "
                f"after ÷ before (below 1: cheaper after), per-round ratios as [min–max]", ""]
        head = ("#", "measurement", "unit", "before", "after", "after÷before",
                "× baseline after÷before", "best after÷best")
        lines = [head]
        keys = [k for k in before[0] if all(k in b for b in before) and all(k in a for a in after)]
        for key in keys:
            figure, label, unit = key
            b_med = statistics.median(b[key][0] for b in before)
            a_med = statistics.median(a[key][0] for a in after)
            raw = [a[key][0] / b[key][0] for b, a in pairs if b[key][0]]
            base = [a[key][2] / b[key][2] for b, a in pairs if a[key][2] and b[key][2]]
            b_best = min(b[key][1] for b in before)
            best = f"{min(a[key][1] for a in after) / b_best:.3f}" if b_best else "–"
            show = plain if unit == "ratio" else seconds
            lines.append((figure, label, unit, show(b_med), show(a_med), spread(raw),
                          spread(base), best))
        widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
        for r in lines:
            out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        only = sorted({k for b in before for k in b} ^ {k for a in after for k in a})
        for figure, label, unit in only:
            side = "after" if any((figure, label, unit) in a for a in after) else "before"
            out.append(f"only {side}: {figure}  {label}")
    return out


def seconds(x: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if x >= scale or unit == "ns":
            return f"{x / scale:.3g} {unit}"
    raise AssertionError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = Path(__file__).resolve().parent.parent
    parser.add_argument("before", nargs="?", type=Path, default=here,
                        help="the source tree before (default: this checkout)")
    parser.add_argument("after", nargs="?", type=Path, default=here,
                        help="the source tree after (default: this checkout)")
    parser.add_argument("--rounds", type=int,
                        help="rounds per side (default 3; 1 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="the scripts' --quick modes (CI smoke run)")
    parser.add_argument("--bench", nargs="+", choices=tuple(SCRIPTS),
                        help="which benchmarks (default both; engine only with --quick)")
    parser.add_argument("--keep", type=Path, help="keep the outputs in this folder")
    parser.add_argument("--read", type=Path, metavar="DIR",
                        help="only report on the outputs kept in DIR")
    args = parser.parse_args(argv)
    if args.read:
        for line in report(args.read, args.bench or list(SCRIPTS)):
            print(line)
        return 0
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.bench = args.bench or (["engine"] if args.quick else list(SCRIPTS))
    if args.rounds < 1:
        parser.error("--rounds >= 1")
    args.before, args.after = args.before.resolve(), args.after.resolve()
    for tree in (args.before, args.after):
        if not (tree / "durablelab" / "__init__.py").exists():
            parser.error(f"{tree} holds no durablelab package")
    print(f"before    {args.before}\nafter     {args.after}\n"
          f"rounds    {args.rounds}{' (--quick)' if args.quick else ''}", flush=True)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="durablelab-before-after-"))
    folder.mkdir(parents=True, exist_ok=True)
    for bench in args.bench:
        script = SCRIPTS[bench]
        if not filecmp.cmp(args.before / "bench" / script, args.after / "bench" / script,
                           shallow=False):
            print(f"note: bench/{script} differs between the trees: rows it changed measure "
                  f"different things")
    for r in range(1, args.rounds + 1):
        sides = [("before", args.before), ("after", args.after)]
        for bench in args.bench:
            for side, tree in (sides if r % 2 else sides[::-1]):
                print(f"round {r}/{args.rounds}: {SCRIPTS[bench]} {side}", flush=True)
                run_round(tree, SCRIPTS[bench], args.quick, folder / f"{bench}-{side}-{r}.txt")
    for line in report(folder, args.bench):
        print(line)
    print(f"\noutputs in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
