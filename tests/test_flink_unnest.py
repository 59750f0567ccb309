"""Flink's CROSS JOIN UNNEST (issue 27; the Flink SQL cookbook's expanding arrays): a row
per element of the array, none for an empty or NULL array, as flowc's EXPLODE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.files import Row, read_json_dir, write_batches
from tests.helpers.plans import job_graph_json
from tests.helpers.spark_run import compiled, run_generated, spark_codes

HEAD = """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE HarryPotter (`character` STRING, spells ARRAY<STRING>)
  WITH (connector = 'files', path = 'hp', format = 'json', max_files_per_trigger = 1);
CREATE TABLE spells_cast (`character` STRING, spell STRING)
  WITH (connector = 'files', path = 'out', format = 'json');
"""
UNNEST = """CREATE TEMPORARY VIEW SpellsPerCharacter AS
  SELECT HarryPotter.`character`, SpellsTable.spell
  FROM HarryPotter CROSS JOIN UNNEST(HarryPotter.spells) AS SpellsTable (spell);
INSERT INTO spells_cast SELECT `character`, spell FROM SpellsPerCharacter WHERE spell <> 'x';
"""
PIPE = """CREATE TEMPORARY VIEW SpellsPerCharacter AS
  FROM HarryPotter |> EXPLODE spells AS spell |> SELECT `character`, spell;
INSERT INTO spells_cast SELECT `character`, spell FROM SpellsPerCharacter WHERE spell <> 'x';
"""


def test_cross_join_unnest_plans_as_explode() -> None:
    assert job_graph_json(HEAD + UNNEST) == job_graph_json(HEAD + PIPE)


BATCHES: list[list[Row]] = [
    [
        {"character": "Harry", "spells": ["Expelliarmus", "Lumos", "x"]},
        {"character": "Ron", "spells": []},
    ],
    [
        {"character": "Hermione", "spells": ["Alohomora", "Alohomora"]},
        {"character": "Neville", "spells": None},
    ],
    [{"character": "Luna", "spells": ["Lumos"]}, {"character": "Harry", "spells": ["Accio"]}],
]


def test_cross_join_unnest_gives_flinks_rows_on_spark(spark: Any, tmp_path: Path) -> None:
    """A row per element in order, repeats kept; an empty or NULL array gives none (Flink's
    inner join with the unnested table); across three micro-batches and a restart."""
    write_batches(tmp_path / "hp", BATCHES[:2])
    job = compiled(tmp_path, HEAD + UNNEST)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "hp", BATCHES)
    run_generated(spark, tmp_path, compiled(tmp_path, HEAD + UNNEST))
    expected = sorted(
        (row["character"], spell)
        for batch in BATCHES
        for row in batch
        for spell in row["spells"] or []
        if spell != "x"
    )
    rows = sorted((r["character"], r["spell"]) for r in read_json_dir(tmp_path / "out"))
    assert rows == expected
    assert len(rows) == 6
