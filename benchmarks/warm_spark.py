"""Cold against warm Spark (docs/warm-spark.md): whole ``flowc`` processes, and the time
to their first line of output.

Each round runs, one after the other: ``flowc run examples/wordcount.flow
--available-now``, the same for ``examples/clicks_per_user.flow``, and ``flowc test
examples/wordcount.flow``, each cold (a state folder with no server: a new JVM each time)
and warm (the state folder of a server this script starts with ``flowc spark start`` and
stops at the end). Every job runs on a copy of ``examples/`` of its mode, so the second
round is a second run on the same checkpoint. The machine's load average is printed
before and after: other processes running Spark slow both columns.

    python -m benchmarks.warm_spark [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (label, flowc arguments, with {examples} the copy of examples/).
CASES = (
    ("run wordcount.flow --available-now", ("run", "{examples}/wordcount.flow", "--available-now")),
    (
        "run clicks_per_user.flow --available-now",
        ("run", "{examples}/clicks_per_user.flow", "--available-now"),
    ),
    ("test wordcount.flow", ("test", "{examples}/wordcount.flow")),
)


@dataclass(slots=True)
class Timing:
    whole_s: float
    first_line_s: float
    first_line: str
    exit_code: int


def timed(args: list[str], env: dict[str, str]) -> Timing:
    """One flowc process: its wall time and when its first line came (either stream)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "flowc", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    first_at = time.monotonic() - started
    process.stdout.read()
    code = process.wait()
    return Timing(time.monotonic() - started, first_at, first.rstrip(), code)


def flowc(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "flowc", *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"flowc {' '.join(args)} failed: {done.stdout}{done.stderr}")
    return done.stdout


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="flowc-warm-bench-"))
    modes = {}
    for mode in ("cold", "warm"):
        examples = work / mode / "examples"
        shutil.copytree(ROOT / "examples", examples)
        state = work / mode / "state"
        state.mkdir()
        modes[mode] = (examples, {**os.environ, "FLOWC_STATE_DIR": str(state)})
    print(f"load average before: {load()} ({os.cpu_count()} cores)", flush=True)
    start_began = time.monotonic()
    print(flowc(["spark", "start", "--idle-minutes", "30"], modes["warm"][1]).strip(), flush=True)
    print(f"flowc spark start: {time.monotonic() - start_began:.1f} s", flush=True)
    results: dict[tuple[str, str], list[Timing]] = {}
    try:
        for round_ in range(1, args.rounds + 1):
            for label, case in CASES:
                for mode in ("cold", "warm"):
                    examples, env = modes[mode]
                    command = [a.format(examples=examples) for a in case]
                    timing = timed(command, env)
                    results.setdefault((label, mode), []).append(timing)
                    print(
                        f"round {round_} {mode:4} {label}: {timing.whole_s:.2f} s, first line "
                        f"{timing.first_line_s:.2f} s ({timing.first_line[:70]!r}), "
                        f"exit {timing.exit_code}, load {load()}",
                        flush=True,
                    )
    finally:
        print(flowc(["spark", "stop"], modes["warm"][1]).strip(), flush=True)
    print(f"load average after: {load()}\n")
    columns = ("command", "cold whole (s)", "warm whole (s)", "cold first line", "warm first line")
    print("| " + " | ".join(columns) + " |")
    print("|---|---|---|---|---|")
    for label, _ in CASES:
        cold, warm = results[(label, "cold")], results[(label, "warm")]
        print(
            f"| `flowc {label}` | {_span([t.whole_s for t in cold])} | "
            f"{_span([t.whole_s for t in warm])} | {_span([t.first_line_s for t in cold])} | "
            f"{_span([t.first_line_s for t in warm])} |"
        )
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _span(values: list[float]) -> str:
    """The median, and the range where there are several rounds."""
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:.2f}"
    return f"{middle:.2f} ({min(values):.2f}-{max(values):.2f})"


if __name__ == "__main__":
    raise SystemExit(main())
