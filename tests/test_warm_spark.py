"""The warm Spark (docs/warm-spark.md): ``flowc spark start|status|stop``, a server that
stops itself when idle, runs through it that equal runs on a new local session (across
micro-batches and a restart on the same checkpoint), console sinks shown by the relay as
Spark's console sink shows them, one Connect session per run, and the line a job that
cannot run through it prints as it runs the cold way (--master; a static spark.* setting,
found by asking the server).

Two real Spark Connect servers: one for the module, one for the idle stop (its own state
folder, a 3 s idle limit).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import flowc
from flowc.cli.main import main
from flowc.runtime.run import run_job
from flowc.runtime.warm import clients_dir, read_server, record_path
from tests.helpers.files import read_json_dir

pytest.importorskip("grpc", reason="the warm Spark is a Spark Connect server: flowc[connect]")

ROOT = Path(__file__).resolve().parent.parent

WINDOWS = """
SET parallelism = 2;
CREATE SOURCE clicks (user_id STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK per_user WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO per_user
  FROM clicks
  |> KEY BY user_id
  |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)
  |> AGGREGATE count(*) AS clicks;
"""

#: A timestamp as text: a session's time zone decides what it shows.
SHOWN = """
{zone}CREATE SOURCE events (id BIGINT, ts TIMESTAMP)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK shown WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO shown FROM events |> SELECT id, CAST(ts AS STRING) AS local_time;
"""

T0 = datetime(2026, 3, 1, 9, 0, 0, tzinfo=UTC)


def _env(folder: Path) -> dict[str, str]:
    """The environment of a flowc process using the warm Spark in ``folder``."""
    return {**os.environ, "FLOWC_STATE_DIR": str(folder), "TZ": "UTC"}


def _flowc(folder: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowc", *args],
        env=_env(folder),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A warm Spark for the module (its state folder), stopped at the end by flowc
    spark stop (the stop test: its process and record gone)."""
    folder = tmp_path_factory.mktemp("warm-state")
    started = _flowc(folder, "spark", "start", "--idle-minutes", "20")
    assert started.returncode == 0, started.stderr + started.stdout
    server = read_server(folder)
    assert server is not None
    try:
        yield folder
    finally:
        stopped = _flowc(folder, "spark", "stop", timeout=120)
    # flowc spark stop, checked here: the server ended and took its record with it
    assert stopped.stdout == f"the warm Spark (pid {server.pid}) stopped\n", stopped.stderr
    assert not _alive(server.pid) and not record_path(folder).exists()


def test_status_shows_the_running_server(warm: Path) -> None:
    server = read_server(warm)
    assert server is not None
    status = _flowc(warm, "spark", "status")
    assert status.returncode == 0, status.stderr
    lines = {line.split()[0]: line.split()[1:] for line in status.stdout.splitlines()[1:]}
    assert lines["pid"] == [str(server.pid)]
    assert lines["port"] == [str(server.port)]
    assert {"uptime", "idle", "log"} <= set(lines)
    assert status.stdout.startswith(f"the warm Spark runs: sc://localhost:{server.port}\n")
    again = _flowc(warm, "spark", "start")  # a second start finds the first
    assert again.returncode == 0 and "already runs" in again.stdout
    assert read_server(warm) == server


#: Asks the server for one row; exits 0 with the row, else prints the error's class.
ASK = """
import sys
from pyspark.sql import SparkSession
try:
    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    print(spark.range(3).count())
except Exception as error:
    print(type(error).__name__, error)
    sys.exit(3)
"""


def test_only_a_client_with_the_token_is_served(warm: Path) -> None:
    """Any local user reaches a port of 127.0.0.1, and a Spark Connect session runs code as
    the server's user: the server takes only requests with the token of its record, which
    this user alone can read, and flowc never prints the token."""
    server = read_server(warm)
    assert server is not None
    assert len(server.token) >= 32 and server.token in server.url
    assert record_path(warm).stat().st_mode & 0o777 == 0o600
    assert warm.stat().st_mode & 0o777 == 0o700
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"}

    def ask(url: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", ASK, url], env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip

    served = ask(server.url)
    assert (served.returncode, served.stdout.strip()) == (0, "3"), served.stdout + served.stderr
    for url in (f"sc://localhost:{server.port}", f"sc://localhost:{server.port}/;token=wrong"):
        refused = ask(url)
        assert refused.returncode == 3, refused.stdout
        assert "UNAUTHENTICATED" in refused.stdout or "nauthenticated" in refused.stdout, (
            refused.stdout
        )
    status = _flowc(warm, "spark", "status")
    assert server.token not in status.stdout + status.stderr
    assert server.token not in (warm / "spark.log").read_text(encoding="utf-8")


def server_token(folder: Path) -> str:
    server = read_server(folder)
    assert server is not None
    return server.token


def _clicks(batch: int) -> list[dict[str, Any]]:
    """Batch 0 fills minute 0; batch 1 minute 1 and one click at minute 3 (the watermark
    then closes minutes 0 and 1)."""
    if batch == 0:
        return [{"user_id": f"u{i % 2}", "ts": (T0 + timedelta(seconds=5 * i)).isoformat()}
                for i in range(1, 11)]  # fmt: skip
    rows = [{"user_id": f"u{i % 3}", "ts": (T0 + timedelta(seconds=60 + 7 * i)).isoformat()}
            for i in range(8)]  # fmt: skip
    return [*rows, {"user_id": "u9", "ts": (T0 + timedelta(minutes=3)).isoformat()}]


def _closed_windows(rows: list[dict[str, Any]]) -> Counter[tuple[str, str, int]]:
    """Plain Python: each (user, minute) window whose end the watermark (the latest ts
    less 5 s) has passed, with its count of clicks."""
    times = [datetime.fromisoformat(r["ts"]) for r in rows]
    watermark = max(times) - timedelta(seconds=5)
    counts: Counter[tuple[str, datetime]] = Counter()
    for row, ts in zip(rows, times, strict=True):
        counts[(row["user_id"], ts.replace(second=0))] += 1
    return Counter(
        {
            (user, start.strftime("%H:%M"), n): 1
            for (user, start), n in counts.items()
            if start + timedelta(minutes=1) <= watermark
        }
    )


def _written(folder: Path) -> Counter[tuple[str, str, int]]:
    found: Counter[tuple[str, str, int]] = Counter()
    for row in read_json_dir(folder / "out"):
        start = next(v for k, v in row.items() if k.endswith("start"))
        found[(row["user_id"], datetime.fromisoformat(start).strftime("%H:%M"), row["clicks"])] += 1
    return found


def _add_batch(folder: Path, batch: int) -> None:
    path = folder / "in" / f"batch-{batch}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in _clicks(batch)), encoding="utf-8")
    stamp = 1_700_000_000 + 10 * batch
    os.utime(path, (stamp, stamp))


def test_a_warm_run_writes_what_a_cold_run_writes(
    warm: Path, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same windowed job, run warm (flowc run through the server) and cold (a local
    session, here the tests' own), on one batch and then restarted on its checkpoint with
    another: each time both wrote what plain Python says."""
    monkeypatch.setenv("TZ", "UTC")
    cold, warm_job = tmp_path / "cold", tmp_path / "warm"
    for folder in (cold, warm_job):
        folder.mkdir()
        (folder / "job.flow").write_text(WINDOWS, encoding="utf-8")
    given: list[dict[str, Any]] = []
    for batch in (0, 1):
        given += _clicks(batch)
        for folder in (cold, warm_job):
            _add_batch(folder, batch)
        job = flowc.compile(WINDOWS, str(cold / "job.flow"), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None]
        ran = _flowc(warm, "run", str(warm_job / "job.flow"), "--available-now")
        assert ran.returncode == 0, ran.stderr
        assert "running on the warm Spark at sc://localhost:" in ran.stderr
        assert server_token(warm) not in ran.stdout + ran.stderr
        assert "starting Spark" not in ran.stderr
        expected = _closed_windows(given)
        assert _written(cold) == expected
        assert _written(warm_job) == expected
    assert len(expected) >= 4  # minute 0 and minute 1, for several users


def test_each_run_has_its_own_session(warm: Path, tmp_path: Path) -> None:
    """A job's SET spark.sql.session.timeZone stays in its run's Connect session: the next
    job through the same server shows timestamps in the server's zone (UTC)."""
    instants = [T0 + timedelta(hours=h, minutes=7 * h) for h in range(4)]
    for name, zone in (("east", "America/New_York"), ("plain", None)):
        folder = tmp_path / name
        (folder / "in").mkdir(parents=True)
        rows = [{"id": i, "ts": t.isoformat()} for i, t in enumerate(instants)]
        (folder / "in" / "rows.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        setting = f"SET spark.sql.session.timeZone = '{zone}';\n" if zone else ""
        (folder / "job.flow").write_text(SHOWN.format(zone=setting), encoding="utf-8")
        ran = _flowc(warm, "run", str(folder / "job.flow"), "--available-now")
        assert ran.returncode == 0, ran.stderr
        assert "running on the warm Spark" in ran.stderr
        shown = {r["id"]: r["local_time"] for r in read_json_dir(folder / "out")}
        local = ZoneInfo(zone or "UTC")
        assert shown == {
            i: t.astimezone(local).strftime("%Y-%m-%d %H:%M:%S") for i, t in enumerate(instants)
        }


def test_a_job_connect_cannot_run_says_why_and_runs_cold(
    warm: Path, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """--master given: the job runs on a local session (here the tests' own), saying so
    in one line; its console sink is no reason (the relay would show it)."""
    monkeypatch.setenv("FLOWC_STATE_DIR", str(warm))
    monkeypatch.setenv("TZ", "UTC")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "rows.json").write_text('{"word": "alpha"}\n{"word": "beta"}\n')
    (tmp_path / "job.flow").write_text(
        "CREATE SOURCE words (word STRING) WITH (connector = 'files', path = 'in', "
        "format = 'json');\nCREATE SINK shown WITH (connector = 'console');\n"
        "INSERT INTO shown FROM words |> SELECT upper(word) AS word;\n",
        encoding="utf-8",
    )
    job = str(tmp_path / "job.flow")
    assert main(["run", job, "--available-now", "--master", "local[2]"]) == 0
    captured = capfd.readouterr()
    assert "running on a new local Spark, not the warm one: --master was given\n" in captured.err
    assert "starting Spark (a new JVM" in captured.err
    assert "[shown] batch 0: 2 rows in, 2 written" in captured.err


#: A word count (update mode) and the words themselves (append mode), each to a console
#: sink, one file a micro-batch.
COUNTS = """
SET parallelism = 2;
CREATE SOURCE lines (line STRING)
  WITH (connector = 'files', path = 'in', format = 'text', max_files_per_trigger = 1);
CREATE SINK counts WITH (connector = 'console', mode = 'update');
INSERT INTO counts
  FROM lines
  |> EXPLODE split(line, ' ') AS word
  |> KEY BY word
  |> AGGREGATE count(*) AS n;
"""
WORDS = """
CREATE SOURCE lines (line STRING)
  WITH (connector = 'files', path = 'in', format = 'text', max_files_per_trigger = 1);
CREATE SINK words WITH (connector = 'console', mode = 'append');
INSERT INTO words FROM lines |> EXPLODE split(line, ' ') AS word |> SELECT upper(word) AS word;
"""
#: Three files: the first run reads two (two micro-batches), the restart the third.
LINES = ["to be or not to be", "that is the question to be", "or not"]

#: The cold side: one process, one local Spark (its JVM prints the console sinks on this
#: process's standard output), each job run as flowc run does, the files of each run
#: written first; the runs' order is the warm side's.
COLD_RUNS = """
import io, json, os, sys
import flowc
from flowc.runtime.run import run_job
runs = json.loads(sys.argv[1])
for files, jobs in runs:
    for path, text, stamp in files:
        with open(path, "w") as f:
            f.write(text)
        os.utime(path, (stamp, stamp))
    for path in jobs:
        job = flowc.compile(open(path).read(), path, for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=sys.stderr)
        assert [q.error for q in report.queries] == [None], report
        sys.stdout.flush()
"""


def _blocks(text: str) -> list[tuple[int, list[tuple[str, ...]]]]:
    """Console blocks: each batch's number and its table's rows."""
    found: list[tuple[int, list[tuple[str, ...]]]] = []
    for line in text.splitlines():
        if line.startswith("Batch: "):
            found.append((int(line.removeprefix("Batch: ")), []))
        elif line.startswith("|") and found:
            found[-1][1].append(tuple(c.strip() for c in line.strip("|").split("|")))
    return [(n, rows[1:]) for n, rows in found]  # rows[0]: the header


def test_a_console_job_prints_warm_what_it_prints_cold(warm: Path, tmp_path: Path) -> None:
    """Console sinks in update and append mode, two micro-batches and a restart on the
    same checkpoint: the warm runs' standard output (the relay) is the cold runs' (Spark's
    console sink) byte for byte, with no line saying they ran cold, and each batch shows
    what plain Python says."""
    jobs = {"counts": COUNTS, "words": WORDS}
    runs: list[tuple[list[tuple[str, str, int]], list[str]]] = []
    for side in ("cold", "warm"):
        for name, text in jobs.items():
            (tmp_path / side / name / "in").mkdir(parents=True)
            (tmp_path / side / name / "job.flow").write_text(text, encoding="utf-8")
    for side in ("cold", "warm"):
        for files in (LINES[:2], LINES[2:]):
            written = [
                (str(tmp_path / side / name / "in" / f"{LINES.index(line)}.txt"), line + "\n",
                 1_700_000_000 + 10 * LINES.index(line))
                for name in jobs for line in files
            ]  # fmt: skip
            runs.append((written, [str(tmp_path / side / name / "job.flow") for name in jobs]))
    cold = subprocess.run(
        [sys.executable, "-c", COLD_RUNS, json.dumps(runs[:2])],
        env=_env(tmp_path / "no-server"), capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    assert cold.returncode == 0, cold.stderr
    shown = []
    relays = tmp_path / "relays"  # the warm runs' temporary folders: their relay's
    relays.mkdir()
    for files, paths in runs[2:]:
        for path, text, stamp in files:
            Path(path).write_text(text, encoding="utf-8")
            os.utime(path, (stamp, stamp))
        for path in paths:
            ran = subprocess.run(
                [sys.executable, "-m", "flowc", "run", path, "--available-now"],
                env={**_env(warm), "TMPDIR": str(relays)}, capture_output=True, text=True,
                timeout=600, check=False,
            )  # fmt: skip
            assert ran.returncode == 0, ran.stderr
            assert "running on the warm Spark at sc://localhost:" in ran.stderr
            assert "running on a new local Spark" not in ran.stderr
            assert "starting Spark" not in ran.stderr
            shown.append(ran.stdout)
    assert "".join(shown) == cold.stdout
    # plain Python: counts (update) shows each batch's words with their counts so far;
    # words (append) each batch's words, upper-cased
    seen: Counter[str] = Counter()
    counts, words = [], []
    for number, line in enumerate(LINES):
        seen.update(line.split())
        counts.append((number, sorted((w, str(seen[w])) for w in set(line.split()))))
        words.append((number, sorted((w.upper(),) for w in line.split())))
    blocks: dict[str, list[tuple[int, list[tuple[str, ...]]]]] = {"counts": [], "words": []}
    for run in range(2):
        for index, name in enumerate(jobs):
            blocks[name] += [(n, sorted(r)) for n, r in _blocks(shown[2 * run + index])]
    assert blocks == {"counts": counts, "words": words}
    assert list(relays.iterdir()) == []  # each run removed its relay's folder


def test_a_static_setting_runs_cold_with_the_setting(warm: Path, tmp_path: Path) -> None:
    """A SET of a static spark.* setting, which a Connect session would skip without a
    word: the run asks the server, says why it runs cold, and the local session it starts
    (after a Connect probe in the same process) writes the rows."""
    (tmp_path / "in").mkdir()
    amounts = [1, 4, 7, 2, 9]
    rows = "".join(json.dumps({"user": f"u{a}", "amount": a}) + "\n" for a in amounts)
    (tmp_path / "in" / "rows.json").write_text(rows, encoding="utf-8")
    (tmp_path / "job.flow").write_text(
        f"SET spark.sql.warehouse.dir = '{tmp_path / 'warehouse'}';\n"
        "CREATE SOURCE pay (user STRING, amount BIGINT)\n"
        "  WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK big WITH (connector = 'files', path = 'out', format = 'json');\n"
        "INSERT INTO big FROM pay |> WHERE amount > 3;\n",
        encoding="utf-8",
    )
    ran = _flowc(warm, "run", str(tmp_path / "job.flow"), "--available-now")
    assert ran.returncode == 0, ran.stderr
    assert (
        "running on a new local Spark, not the warm one: a Spark Connect session cannot SET "
        "spark.sql.warehouse.dir (set when Spark starts)\n" in ran.stderr
    )
    written = sorted(r["amount"] for r in read_json_dir(tmp_path / "out"))
    assert written == sorted(a for a in amounts if a > 3)


def test_flowc_test_runs_on_the_warm_spark(warm: Path) -> None:
    ran = _flowc(warm, "test", str(ROOT / "examples" / "wordcount.flow"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("running on the warm Spark at sc://localhost:")
    assert ran.stdout.rstrip().endswith("1 passed, 0 failed")


def test_an_idle_server_stops_itself(tmp_path: Path) -> None:
    """--idle-minutes 0.05 (3 s): busy while a live process's mark is in clients/, then
    stopped 3 s after it went; status and stop then find no server."""
    started = _flowc(tmp_path, "spark", "start", "--idle-minutes", "0.05")
    assert started.returncode == 0, started.stderr + started.stdout
    server = read_server(tmp_path)
    assert server is not None
    mark = clients_dir(tmp_path) / str(os.getpid())
    mark.parent.mkdir(exist_ok=True)
    mark.touch()
    try:
        time.sleep(8)
        assert read_server(tmp_path) == server, "stopped while a client used it"
    finally:
        mark.unlink()
    deadline = time.monotonic() + 60
    while record_path(tmp_path).exists() or _alive(server.pid):
        assert time.monotonic() < deadline, "the idle server did not stop"
        time.sleep(0.5)
    assert "idle for 0.05 minutes, stopping" in (tmp_path / "spark.log").read_text()
    status = _flowc(tmp_path, "spark", "status")
    assert status.returncode == 1 and "not running" in status.stdout
    assert "not running" in _flowc(tmp_path, "spark", "stop").stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return ""
