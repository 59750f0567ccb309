"""Escapes of untrusted mode through what Spark's functions interpret again
(docs/security.md, "Refused functions"): each shown real on Spark as the trusted
program's text runs there, and refused untrusted.

- ``xpath*``: Spark's XPath functions parse the document with an XML parser that loads
  the external DTD it names (``<!DOCTYPE x SYSTEM '/any/path'>``), so a document in the
  program's own input read a file outside the base directory, whose entities then filled
  the result. Untrusted, the ``xpath*`` functions are refused (E0952).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc import Severity

XPATH_FUNCTIONS = (
    "xpath", "xpath_boolean", "xpath_double", "xpath_float", "xpath_int", "xpath_long",
    "xpath_number", "xpath_short", "xpath_string",
)  # fmt: skip


def program(expression: str) -> str:
    return (
        "CREATE SOURCE s (v STRING) WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        f"INSERT INTO o FROM s |> SELECT {expression} AS w;\n"
    )


def test_xpath_reads_an_external_dtd_outside_the_base_dir_on_spark(
    spark: Any, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.dtd").write_text('<!ENTITY e "secret-from-outside">\n', encoding="utf-8")
    base = tmp_path / "base"
    (base / "in").mkdir(parents=True)
    document = f'<!DOCTYPE x SYSTEM "{(outside / "secret.dtd").as_uri()}"><x>&e;</x>'
    (base / "in" / "a.json").write_text(
        spark.createDataFrame([(document,)], "v STRING").toJSON().first() + "\n",
        encoding="utf-8",
    )
    expression = "xpath_string(v, '/x')"
    trusted = flowc.compile(program(expression), str(base / "job.flow"), for_spark=True)
    assert trusted is not None
    rows = spark.read.schema("v STRING").json(str(base / "in")).selectExpr(expression).collect()
    assert [r[0] for r in rows] == ["secret-from-outside"]

    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(program(expression), str(base / "job.flow"), for_spark=True, trusted=False)
    errors = [d for d in refused.value.diagnostics if d.severity is Severity.ERROR]
    assert [d.code for d in errors] == ["E0952"]
    assert (errors[0].span.line, errors[0].span.column) == (3, 32)
    assert "external DTD" in errors[0].message


@pytest.mark.parametrize("name", XPATH_FUNCTIONS)
def test_every_xpath_function_is_refused_untrusted_however_spelled(name: str) -> None:
    for spelled in (name, name.upper(), f"`{name}`"):
        with pytest.raises(flowc.CompileError) as refused:
            flowc.compile(program(f"{spelled}(v, '/x')"), "job.flow", for_spark=True, trusted=False)
        codes = [d.code for d in refused.value.diagnostics if d.severity is Severity.ERROR]
        assert codes == ["E0952"], spelled


# -- regular expressions: a repeated group overflows the stack, which ends Spark's JVM


@pytest.mark.parametrize(
    "expression",
    [
        "rlike(v, '(a|b)*c')",
        "v RLIKE '(a|b)*c'",
        "v REGEXP '(ab)+'",
        "regexp(v, '(a)+')",
        "regexp_like(v, '(a){2,}')",
        "regexp_replace(v, '(?:ab)+', 'x')",
        "regexp_extract(v, '(a|b)*', 1)",
        "regexp_extract_all(v, '(a|b)*', 1)",
        "regexp_count(v, '(a|b)*')",
        "regexp_instr(v, '(a|b)*')",
        "regexp_substr(v, '(a|b)*')",
        "split(v, '(a|b)+')",
        "str_to_map(v, ',', '(x)+')",
        "rlike(v, '(a)\\\\1')",
        "rlike(v, '(a|b\\u0029*c')",
        "rlike(v, '(?x)(a) #\\n *')",
        "rlike(v, v)",
        "rlike(v, concat('(a', ')*'))",
    ],
)
def test_a_regex_that_repeats_a_group_or_is_not_a_literal_is_refused(expression: str) -> None:
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(program(expression), "job.flow", for_spark=True, trusted=False)
    errors = [d for d in refused.value.diagnostics if d.severity is Severity.ERROR]
    assert [d.code for d in errors] == ["E0961"]
    assert errors[0].help is not None
    flowc.compile(program(expression), "job.flow", for_spark=True)


@pytest.mark.parametrize(
    "expression",
    [
        "rlike(v, '[ab]*c')",
        "regexp_replace(v, '\\\\s+', ' ')",
        "regexp_extract(v, '([a-z]+)-(\\\\d+)', 2)",
        "split(v, ',')",
        "rlike(v, '\\\\(a\\\\)*')",
        "v LIKE '%(a)%'",
    ],
)
def test_a_literal_regex_without_repeated_groups_is_allowed(expression: str) -> None:
    assert flowc.compile(program(expression), "job.flow", for_spark=True, trusted=False)
