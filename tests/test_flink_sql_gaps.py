"""Flink SQL as Flink users write it (issue 27): a GROUP BY key named with its relation
after a join (``GROUP BY o.id``) is the pipe form's ``KEY BY orders.id``, read after the
grouping as ``id``, in both dialects (the plans are equal)."""

from __future__ import annotations

import pytest

from tests.helpers.plans import job_graph_json

HEAD = """SET max_parallelism = 16;
CREATE SOURCE orders (id BIGINT, amount INT) WITH (connector = 'datagen');
CREATE SOURCE shipments (order_id BIGINT, carrier STRING) WITH (connector = 'datagen');
CREATE SINK totals WITH (connector = 'console', mode = 'update');
"""
GROUPED = """INSERT INTO totals
SELECT o.id, s.carrier, o.id + 1 AS next_id, count(*) AS n, sum(o.amount) AS total
FROM orders o JOIN shipments s ON o.id = s.order_id
GROUP BY o.id, s.carrier HAVING o.id > 3 AND count(*) > 1;
"""
PIPE = """INSERT INTO totals FROM orders
|> JOIN shipments ON orders.id = shipments.order_id
|> KEY BY orders.id, shipments.carrier
|> AGGREGATE count(*) AS n, sum(orders.amount) AS total
|> WHERE id > 3 AND n > 1
|> SELECT id, carrier, id + 1 AS next_id, n, total;
"""


@pytest.mark.parametrize("dialect", ["", "SET sql.dialect = 'flink';\n"], ids=["spark", "flink"])
def test_a_qualified_group_by_key_plans_as_the_pipe_forms_key_by(dialect: str) -> None:
    assert job_graph_json(dialect + HEAD + GROUPED) == job_graph_json(dialect + HEAD + PIPE)
