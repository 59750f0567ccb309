"""The Flink-dialect programs tests/test_flink_sql_against_flink.py compares with Flink
2.3's JobGraphs, each with the PyFlink job Flink builds for it, and the PyFlink helpers the
window jobs share (``WINDOWS``): other tests (the changelog modes) run the same programs."""

from __future__ import annotations

import textwrap


def flink_sql(*parts: str) -> str:
    """A Flink-dialect program of ``parts`` (each dedented on its own)."""
    return "SET sql.dialect = 'flink';\n" + "".join(textwrap.dedent(p) for p in parts)


BIDS = """
CREATE TABLE bids (
  bidtime TIMESTAMP(3), price BIGINT, item STRING, supplier_id STRING,
  WATERMARK FOR bidtime AS bidtime - INTERVAL '1' SECOND
) WITH ('connector' = 'datagen', 'uid' = 'src');
"""

# Imports and helpers the window cases share, put before their jobs.
WINDOWS = """
from pyflink.datastream.functions import KeyedCoProcessFunction, KeyedProcessFunction
from pyflink.datastream.window import (
    EventTimeTrigger, TimeWindow, TimeWindowSerializer, WindowAssigner,
)
from pyflink.java_gateway import get_gateway

JVM = get_gateway().jvm
ASSIGNERS = JVM.org.apache.flink.streaming.api.windowing.assigners
NULL_KEY = JVM.org.apache.flink.api.java.functions.NullByteKeySelector


def minutes(n):
    return JVM.java.time.Duration.ofMinutes(n)


def window_all(stream, assigner, name):
    # Java's windowAll (PyFlink's window_all does not force parallelism 1).
    return DataStream(stream._j_data_stream.windowAll(assigner).max(0)).name(name)


def keyed_window(stream, assigner, name):
    # Java's keyBy(...).window(...): no PyFlink key extractor, so every id compares. The
    # key selector (one constant key) is not part of the graph: the edge is HASH all the same.
    keyed = stream._j_data_stream.keyBy(NULL_KEY())
    return DataStream(keyed.window(assigner).max(0)).name(name)


def keyed_aggregate(stream, name="Keyed Aggregate"):
    # Java's keyBy(...) and a keyed rolling aggregation (StreamGroupedReduceOperator).
    return DataStream(stream._j_data_stream.keyBy(NULL_KEY()).max(0)).name(name)


def add(a, b):
    return a + b


def same(x):
    return x


class Cumulate(WindowAssigner):
    # CUMULATE(size, step): [start, start + step), [start, start + 2 step), ... of a size.
    def __init__(self, size, step):
        self.size, self.step = size, step

    def assign_windows(self, element, timestamp, context):
        start = timestamp - timestamp % self.size
        first = timestamp - timestamp % self.step + self.step
        return [TimeWindow(start, end) for end in range(first, start + self.size + 1, self.step)]

    def get_default_trigger(self, env):
        return EventTimeTrigger.create()

    def get_window_serializer(self):
        return TimeWindowSerializer()

    def is_event_time(self):
        return True


class Process(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value


class Join(KeyedCoProcessFunction):
    def process_element1(self, value, ctx):
        yield value

    def process_element2(self, value, ctx):
        yield value
"""

CASES: dict[str, tuple[str, str, bool]] = {
    # name: (Flink-dialect program, PyFlink job, compare non-uid ids)
    # GROUP BY TUMBLE(...), k with TUMBLE_START/_END: a keyed window, the projection a Map.
    "group_window_tumble_keyed": (
        flink_sql(
            "SET parallelism = 4;",
            BIDS,
            """
            CREATE TABLE o (supplier_id STRING, wstart TIMESTAMP(3), wend TIMESTAMP(3),
              total BIGINT) WITH ('connector' = 'console', 'uid' = 'snk', 'parallelism' = '2');
            INSERT INTO o
            SELECT supplier_id, TUMBLE_START(bidtime, INTERVAL '10' MINUTE) AS wstart,
              TUMBLE_END(bidtime, INTERVAL '10' MINUTE) AS wend, SUM(price) AS total
            FROM bids GROUP BY TUMBLE(bidtime, INTERVAL '10' MINUTE), supplier_id;
            """,
        ),
        """
        env.set_parallelism(4)
        w = keyed_window(source("bids").uid("src"),
            ASSIGNERS.TumblingEventTimeWindows.of(minutes(10)),
            "Window(TUMBLE(bidtime, INTERVAL '10' MINUTE))")
        (w.map(same, output_type=LONG).name("Map").print().name("o").uid("snk")
            .set_parallelism(2))
        """,
        True,
    ),
    # GROUP BY HOP(...) alone with HOP_START/_END: Flink's windowAll, then the Map at the
    # default parallelism again.
    "group_window_hop_unkeyed": (
        flink_sql(
            "SET parallelism = 4;",
            BIDS,
            """
            CREATE TABLE o (wstart TIMESTAMP(3), wend TIMESTAMP(3), n BIGINT)
              WITH ('connector' = 'console');
            INSERT INTO o
            SELECT HOP_START(bidtime, INTERVAL '5' MINUTE, INTERVAL '10' MINUTE) AS wstart,
              HOP_END(bidtime, INTERVAL '5' MINUTE, INTERVAL '10' MINUTE) AS wend,
              COUNT(*) AS n
            FROM bids GROUP BY HOP(bidtime, INTERVAL '5' MINUTE, INTERVAL '10' MINUTE);
            """,
        ),
        """
        env.set_parallelism(4)
        w = window_all(source("bids").uid("src"),
            ASSIGNERS.SlidingEventTimeWindows.of(minutes(10), minutes(5)),
            "Window(HOP(bidtime, INTERVAL '10' MINUTE, INTERVAL '5' MINUTE))")
        w.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # GROUP BY k, SESSION(...) with SESSION_START, under SET max_parallelism.
    "group_window_session_keyed": (
        flink_sql(
            "SET parallelism = 3;\nSET max_parallelism = 64;",
            BIDS,
            """
            CREATE TABLE o (item STRING, wstart TIMESTAMP(3), n BIGINT)
              WITH ('connector' = 'console');
            INSERT INTO o
            SELECT item, SESSION_START(bidtime, INTERVAL '5' MINUTE) AS wstart, COUNT(*) AS n
            FROM bids GROUP BY item, SESSION(bidtime, INTERVAL '5' MINUTE);
            """,
        ),
        """
        env.set_parallelism(3)
        env.set_max_parallelism(64)
        w = keyed_window(source("bids").uid("src"),
            ASSIGNERS.EventTimeSessionWindows.withGap(minutes(5)),
            "Window(SESSION(bidtime, INTERVAL '5' MINUTE))")
        w.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # TABLE(TUMBLE(...)) grouped by window_start, window_end alone: windowAll.
    "tvf_tumble_unkeyed": (
        flink_sql(
            "SET parallelism = 4;",
            BIDS,
            """
            CREATE TABLE o (window_start TIMESTAMP(3), window_end TIMESTAMP(3), total BIGINT)
              WITH ('connector' = 'console');
            INSERT INTO o
            SELECT window_start, window_end, SUM(price) AS total
            FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
            GROUP BY window_start, window_end;
            """,
        ),
        """
        env.set_parallelism(4)
        w = window_all(source("bids").uid("src"),
            ASSIGNERS.TumblingEventTimeWindows.of(minutes(10)),
            "Window(TUMBLE(bidtime, INTERVAL '10' MINUTES))")
        w.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # TABLE(HOP(...)) with a WHERE before the window, keyed; a sink of parallelism 1.
    "tvf_hop_keyed": (
        flink_sql(
            "SET parallelism = 2;",
            BIDS,
            """
            CREATE TABLE o (window_start TIMESTAMP(3), window_end TIMESTAMP(3), item STRING,
              total BIGINT) WITH ('connector' = 'console', 'parallelism' = '1');
            INSERT INTO o
            SELECT window_start, window_end, item, SUM(price) AS total
            FROM TABLE(HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES,
              INTERVAL '10' MINUTES))
            WHERE price > 10
            GROUP BY window_start, window_end, item;
            """,
        ),
        """
        env.set_parallelism(2)
        f = source("bids").uid("src").filter(lambda x: x > 10).name("Filter")
        w = keyed_window(f, ASSIGNERS.SlidingEventTimeWindows.of(minutes(10), minutes(5)),
            "Window(HOP(bidtime, INTERVAL '10' MINUTES, INTERVAL '5' MINUTES))")
        w.map(same, output_type=LONG).name("Map").print().name("o").set_parallelism(1)
        """,
        True,
    ),
    # TABLE(CUMULATE(...)) keyed.
    "tvf_cumulate_keyed": (
        flink_sql(
            "SET parallelism = 4;",
            BIDS,
            """
            CREATE TABLE o (window_start TIMESTAMP(3), window_end TIMESTAMP(3), item STRING,
              total BIGINT) WITH ('connector' = 'console');
            INSERT INTO o
            SELECT window_start, window_end, item, SUM(price) AS total
            FROM TABLE(CUMULATE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES,
              INTERVAL '10' MINUTES))
            GROUP BY window_start, window_end, item;
            """,
        ),
        """
        env.set_parallelism(4)
        w = (source("bids").uid("src").key_by(same)
            .window(Cumulate(600_000, 120_000)).reduce(add)
            .name("Window(CUMULATE(bidtime, INTERVAL '10' MINUTES, INTERVAL '2' MINUTES))"))
        w.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        False,
    ),
    # TABLE(SESSION(TABLE t PARTITION BY k, ...)): sessions per key.
    "tvf_session_partitioned": (
        flink_sql(
            "SET parallelism = 4;",
            BIDS,
            """
            CREATE TABLE o (window_start TIMESTAMP(3), window_end TIMESTAMP(3), item STRING,
              n BIGINT) WITH ('connector' = 'console');
            INSERT INTO o
            SELECT window_start, window_end, item, COUNT(*) AS n
            FROM TABLE(SESSION(TABLE bids PARTITION BY item, DESCRIPTOR(bidtime),
              INTERVAL '5' MINUTES))
            GROUP BY window_start, window_end, item;
            """,
        ),
        """
        env.set_parallelism(4)
        w = keyed_window(source("bids").uid("src"),
            ASSIGNERS.EventTimeSessionWindows.withGap(minutes(5)),
            "Window(SESSION(bidtime, INTERVAL '5' MINUTES))")
        w.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # A five-minute window cascaded over a one-minute one's TUMBLE_ROWTIME: two keyed
    # windows, the second reading the first's Map through a HASH exchange.
    "window_cascaded_over_tumble_rowtime": (
        flink_sql(
            "SET parallelism = 4;",
            BIDS,
            """
            CREATE TABLE o (item STRING, wend TIMESTAMP(3), total BIGINT)
              WITH ('connector' = 'console');
            CREATE VIEW per_minute AS
            SELECT item, TUMBLE_ROWTIME(bidtime, INTERVAL '1' MINUTE) AS rt,
              SUM(price) AS total
            FROM bids GROUP BY TUMBLE(bidtime, INTERVAL '1' MINUTE), item;
            INSERT INTO o
            SELECT item, TUMBLE_END(rt, INTERVAL '5' MINUTE) AS wend, SUM(total) AS total
            FROM per_minute GROUP BY TUMBLE(rt, INTERVAL '5' MINUTE), item;
            """,
        ),
        """
        env.set_parallelism(4)
        w1 = keyed_window(source("bids").uid("src"),
            ASSIGNERS.TumblingEventTimeWindows.of(minutes(1)),
            "Window(TUMBLE(bidtime, INTERVAL '1' MINUTE))")
        m = w1.map(same, output_type=LONG).name("Map")
        w2 = keyed_window(m, ASSIGNERS.TumblingEventTimeWindows.of(minutes(5)),
            "Window(TUMBLE(rt, INTERVAL '5' MINUTE))")
        w2.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # CREATE TEMPORARY TABLE/VIEW and BEGIN STATEMENT SET with two INSERTs from one view:
    # a fork in one chain; the second sink's own parallelism cuts it there.
    "statement_set_of_two_inserts": (
        flink_sql(
            """
            SET parallelism = 2;
            CREATE TEMPORARY TABLE bids (
              bidtime TIMESTAMP(3), price BIGINT, item STRING, supplier_id STRING,
              WATERMARK FOR bidtime AS bidtime - INTERVAL '1' SECOND
            ) WITH ('connector' = 'datagen', 'uid' = 'src');
            CREATE TEMPORARY TABLE o1 (item STRING, price BIGINT)
              WITH ('connector' = 'console', 'uid' = 'o1');
            CREATE TEMPORARY TABLE o2 (supplier_id STRING, price BIGINT)
              WITH ('connector' = 'console', 'uid' = 'o2', 'parallelism' = '3');
            CREATE TEMPORARY VIEW dear AS
              SELECT item, supplier_id, price FROM bids WHERE price > 100;
            BEGIN STATEMENT SET;
            INSERT INTO o1 SELECT item, price FROM dear;
            INSERT INTO o2
              SELECT supplier_id, price * 2 AS price FROM dear WHERE supplier_id <> 'x';
            END;
            """
        ),
        """
        env.set_parallelism(2)
        f = source("bids").uid("src").filter(lambda x: x > 100).name("Filter")
        dear = f.map(same, output_type=LONG).name("Map")
        dear.map(same, output_type=LONG).name("Map").print().name("o1").uid("o1")
        f2 = dear.filter(lambda x: x > 0).name("Filter")
        m2 = f2.map(lambda x: x * 2, output_type=LONG).name("Map")
        m2.print().name("o2").uid("o2").set_parallelism(3)
        """,
        True,
    ),
    # PRIMARY KEY (id) NOT ENFORCED on a sink (an upsert files sink) fed by a GROUP BY over
    # a table with a computed column, under SET max_parallelism.
    "upsert_sink_and_computed_column": (
        flink_sql(
            """
            SET parallelism = 4;
            SET max_parallelism = 128;
            CREATE TABLE orders (id STRING, price BIGINT, qty BIGINT, total AS price * qty)
              WITH ('connector' = 'datagen', 'parallelism' = '2');
            CREATE TABLE o (id STRING, amount BIGINT, PRIMARY KEY (id) NOT ENFORCED)
              WITH ('connector' = 'files', 'path' = 'out/o', 'format' = 'json');
            INSERT INTO o SELECT id, SUM(total) AS amount FROM orders GROUP BY id;
            """
        ),
        """
        env.set_parallelism(4)
        env.set_max_parallelism(128)
        s = source("orders").set_parallelism(2)
        a = keyed_aggregate(s)
        a.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # GROUP BY MOD(price, 10): the key computed in a Map before the exchange.
    "group_by_an_expression": (
        flink_sql(
            "SET parallelism = 4;",
            BIDS,
            """
            CREATE TABLE o (k BIGINT, n BIGINT)
              WITH ('connector' = 'console', 'mode' = 'update', 'uid' = 'snk');
            INSERT INTO o SELECT MOD(price, 10) AS k, COUNT(*) AS n FROM bids
              GROUP BY MOD(price, 10);
            """,
        ),
        """
        env.set_parallelism(4)
        k = source("bids").uid("src").map(lambda x: x % 10, output_type=LONG).name("Map")
        a = keyed_aggregate(k)
        a.map(same, output_type=LONG).name("Map").print().name("o").uid("snk")
        """,
        True,
    ),
    # UNION ALL of two SELECTs, the second over a source of another parallelism: its
    # projection a Map at the default parallelism, both into the sink, unchained.
    "union_all_of_two_selects": (
        flink_sql(
            "SET parallelism = 2;",
            BIDS,
            """
            CREATE TABLE asks (item STRING, amount BIGINT)
              WITH ('connector' = 'datagen', 'parallelism' = '3');
            CREATE TABLE o (item STRING, price BIGINT) WITH ('connector' = 'console');
            INSERT INTO o
            SELECT item, price FROM bids WHERE price > 100
            UNION ALL
            SELECT item, amount * 2 FROM asks;
            """,
        ),
        """
        env.set_parallelism(2)
        b = source("bids").uid("src").filter(lambda x: x > 100).name("Filter")
        b = b.map(same, output_type=LONG).name("Map")
        a = source("asks").set_parallelism(3).map(lambda x: x * 2, output_type=LONG)
        b.union(a.name("Map")).print().name("o")
        """,
        True,
    ),
    # JOIN ON MOD(b.price, 100) = s.skey: the key computed in a Map on its side.
    "join_on_an_expression_key": (
        flink_sql(
            "SET parallelism = 2;",
            BIDS,
            """
            CREATE TABLE suppliers (skey BIGINT, name STRING)
              WITH ('connector' = 'datagen', 'uid' = 'suppliers');
            CREATE TABLE o (item STRING, name STRING) WITH ('connector' = 'console');
            INSERT INTO o
            SELECT b.item, s.name FROM bids b JOIN suppliers s ON MOD(b.price, 100) = s.skey;
            """,
        ),
        """
        env.set_parallelism(2)
        b = source("bids").uid("src").map(lambda x: x % 100, output_type=LONG).name("Map")
        s = source("suppliers").uid("suppliers")
        j = b.key_by(same).connect(s.key_by(same)).process(Join(), output_type=LONG)
        j.name("Join").map(same, output_type=LONG).name("Map").print().name("o")
        """,
        False,
    ),
    # An interval join written as a comma join with BETWEEN on the two times.
    "interval_join": (
        flink_sql(
            """
            SET parallelism = 3;
            CREATE TABLE orders (order_id STRING, order_time TIMESTAMP(3),
              WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND)
              WITH ('connector' = 'datagen', 'uid' = 'orders');
            CREATE TABLE shipments (id STRING, order_id STRING, ship_time TIMESTAMP(3),
              WATERMARK FOR ship_time AS ship_time - INTERVAL '5' SECOND)
              WITH ('connector' = 'datagen', 'uid' = 'shipments', 'parallelism' = '2');
            CREATE TABLE o (order_id STRING, ship_id STRING)
              WITH ('connector' = 'console', 'uid' = 'snk');
            INSERT INTO o
            SELECT o.order_id, s.id AS ship_id
            FROM orders o, shipments s
            WHERE o.order_id = s.order_id
            AND o.order_time BETWEEN s.ship_time - INTERVAL '4' HOUR AND s.ship_time;
            """
        ),
        """
        env.set_parallelism(3)
        o = source("orders").uid("orders")
        s = source("shipments").uid("shipments").set_parallelism(2)
        j = o.key_by(same).connect(s.key_by(same)).process(Join(), output_type=LONG)
        j.name("Join").map(same, output_type=LONG).name("Map").print().name("o").uid("snk")
        """,
        False,
    ),
    # ROW_NUMBER() ... <= 3: Flink's Rank, into an upsert sink keyed by its PRIMARY KEY.
    "row_number_top_n": (
        flink_sql(
            "SET parallelism = 4;\nSET max_parallelism = 256;",
            BIDS,
            """
            CREATE TABLE o (item STRING, supplier_id STRING, price BIGINT,
              PRIMARY KEY (supplier_id, item) NOT ENFORCED)
              WITH ('connector' = 'files', 'path' = 'out/o', 'format' = 'json', 'uid' = 'snk');
            INSERT INTO o
            SELECT item, supplier_id, price FROM (
              SELECT *, ROW_NUMBER() OVER (PARTITION BY supplier_id ORDER BY price DESC) AS rn
              FROM bids)
            WHERE rn <= 3;
            """,
        ),
        """
        env.set_parallelism(4)
        env.set_max_parallelism(256)
        name = "Rank(rankEnd=3, partitionBy=[supplier_id], orderBy=[price DESC])"
        r = source("bids").uid("src").key_by(same).process(Process(), output_type=LONG)
        r.name(name).map(same, output_type=LONG).name("Map").print().name("o").uid("snk")
        """,
        False,
    ),
    # Nexmark q6's form: OVER aggregates on one window (ROWS, and RANGE of an interval, in
    # ms in the name) are Flink's OverAggregate behind a HASH exchange on PARTITION BY.
    "over_rows_nexmark_q6": (
        flink_sql(
            "SET parallelism = 4;\nSET max_parallelism = 256;",
            BIDS,
            """
            CREATE TABLE o (supplier_id STRING, price BIGINT, bidtime TIMESTAMP(3),
              a BIGINT, n BIGINT) WITH ('connector' = 'console', 'uid' = 'snk');
            INSERT INTO o
            SELECT supplier_id, price, bidtime,
              SUM(price) OVER (PARTITION BY supplier_id ORDER BY bidtime
                ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS a,
              COUNT(*) OVER (PARTITION BY supplier_id ORDER BY bidtime
                ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS n
            FROM bids;
            """,
        ),
        """
        env.set_parallelism(4)
        env.set_max_parallelism(256)
        name = (
            "OverAggregate(partitionBy=[supplier_id], orderBy=[bidtime ASC], "
            "window=[ ROWS BETWEEN 10 PRECEDING AND CURRENT ROW])"
        )
        r = source("bids").uid("src").key_by(same).process(Process(), output_type=LONG)
        r.name(name).map(same, output_type=LONG).name("Map").print().name("o").uid("snk")
        """,
        False,
    ),
    "over_range_interval": (
        flink_sql(
            "SET parallelism = 2;",
            BIDS,
            """
            CREATE TABLE o (item STRING, bidtime TIMESTAMP(3), lo BIGINT)
              WITH ('connector' = 'console', 'parallelism' = '1');
            INSERT INTO o
            SELECT item, bidtime, MIN(price) OVER (PARTITION BY item, supplier_id
              ORDER BY bidtime RANGE BETWEEN INTERVAL '2' SECOND PRECEDING AND CURRENT ROW)
            FROM bids;
            """,
        ),
        """
        env.set_parallelism(2)
        name = (
            "OverAggregate(partitionBy=[item, supplier_id], orderBy=[bidtime ASC], "
            "window=[ RANGE BETWEEN 2000 PRECEDING AND CURRENT ROW])"
        )
        r = source("bids").uid("src").key_by(same).process(Process(), output_type=LONG)
        r.name(name).map(same, output_type=LONG).name("Map").print().name("o").set_parallelism(1)
        """,
        False,
    ),
    # LAG over no frame (Flink's RANGE UNBOUNDED PRECEDING, also written out): one
    # OverAggregate for the calls, a Calc after it.
    "over_lag": (
        flink_sql(
            "SET parallelism = 2;",
            BIDS,
            """
            CREATE TABLE o (item STRING, bidtime TIMESTAMP(3), p BIGINT, q BIGINT)
              WITH ('connector' = 'console', 'parallelism' = '1');
            INSERT INTO o
            SELECT item, bidtime, LAG(price) OVER (PARTITION BY item ORDER BY bidtime),
              LAG(price, 2, 3000000000) OVER (PARTITION BY item ORDER BY bidtime)
            FROM bids;
            """,
        ),
        """
        env.set_parallelism(2)
        name = (
            "OverAggregate(partitionBy=[item], orderBy=[bidtime ASC], "
            "window=[ RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW])"
        )
        r = source("bids").uid("src").key_by(same).process(Process(), output_type=LONG)
        r.name(name).map(same, output_type=LONG).name("Map").print().name("o").set_parallelism(1)
        """,
        False,
    ),
    # ROW_NUMBER() ... ORDER BY proctime = 1: Flink's Deduplicate.
    "row_number_deduplication": (
        flink_sql(
            """
            SET parallelism = 4;
            CREATE TABLE orders (order_id STRING, num BIGINT, proctime AS PROCTIME())
              WITH ('connector' = 'datagen', 'uid' = 'src');
            CREATE TABLE o (order_id STRING, num BIGINT)
              WITH ('connector' = 'console', 'parallelism' = '1');
            INSERT INTO o
            SELECT order_id, num FROM (
              SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proctime ASC) AS rn
              FROM orders)
            WHERE rn = 1;
            """
        ),
        """
        env.set_parallelism(4)
        d = source("orders").uid("src").key_by(same).process(Process(), output_type=LONG)
        m = d.name("Deduplicate").map(same, output_type=LONG).name("Map")
        m.print().name("o").set_parallelism(1)
        """,
        False,
    ),
    # ROW_NUMBER() over a window table function: Flink's WindowRank.
    "window_top_n": (
        flink_sql(
            "SET parallelism = 4;",
            BIDS,
            """
            CREATE TABLE o (window_start TIMESTAMP(3), window_end TIMESTAMP(3),
              supplier_id STRING, price BIGINT, rn BIGINT) WITH ('connector' = 'console');
            INSERT INTO o
            SELECT window_start, window_end, supplier_id, price, rn FROM (
              SELECT supplier_id, price, window_start, window_end,
                ROW_NUMBER() OVER (PARTITION BY window_start, window_end, supplier_id
                  ORDER BY price DESC) AS rn
              FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)))
            WHERE rn <= 3;
            """,
        ),
        """
        env.set_parallelism(4)
        name = ("WindowRank(window=[TUMBLE(bidtime, INTERVAL '10' MINUTES)], rankEnd=3, "
                "partitionBy=[supplier_id], orderBy=[price DESC])")
        r = source("bids").uid("src").key_by(same).process(Process(), output_type=LONG)
        m = r.name(name).map(same, output_type=LONG).name("Map")
        m.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        False,
    ),
    # CROSS JOIN UNNEST: a Flat Map chained to the source, then the projection.
    "cross_join_unnest": (
        flink_sql(
            """
            SET parallelism = 2;
            CREATE TABLE orders (id STRING, tags ARRAY<STRING>)
              WITH ('connector' = 'files', 'path' = 'in/orders', 'format' = 'json',
                'uid' = 'src');
            CREATE TABLE o (id STRING, tag STRING)
              WITH ('connector' = 'console', 'parallelism' = '1');
            INSERT INTO o SELECT id, t.tag FROM orders CROSS JOIN UNNEST(tags) AS t (tag);
            """
        ),
        """
        env.set_parallelism(2)
        f = source("orders").uid("src").flat_map(lambda x: [x], output_type=LONG)
        m = f.name("Flat Map").map(same, output_type=LONG).name("Map")
        m.print().name("o").set_parallelism(1)
        """,
        True,
    ),
    # A bare SELECT statement: shown on the console by the sink select_1.
    "bare_query_statement": (
        flink_sql(
            "SET parallelism = 2;",
            BIDS,
            "SELECT item, price * 2 AS doubled FROM bids WHERE price > 10;\n",
        ),
        """
        env.set_parallelism(2)
        f = source("bids").uid("src").filter(lambda x: x > 10).name("Filter")
        f.map(lambda x: x * 2, output_type=LONG).name("Map").print().name("select_1")
        """,
        True,
    ),
    # An unkeyed SESSION table function (windowAll), HAVING a Filter after it, as a bare
    # query, under SET max_parallelism: windowAll keeps its max parallelism 1.
    "tvf_session_unkeyed_with_having": (
        flink_sql(
            "SET parallelism = 3;\nSET max_parallelism = 64;",
            BIDS,
            """
            SELECT window_start, window_end, COUNT(*) AS n
            FROM TABLE(SESSION(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES))
            GROUP BY window_start, window_end HAVING COUNT(*) > 2;
            """,
        ),
        """
        env.set_parallelism(3)
        env.set_max_parallelism(64)
        w = window_all(source("bids").uid("src"),
            ASSIGNERS.EventTimeSessionWindows.withGap(minutes(5)),
            "Window(SESSION(bidtime, INTERVAL '5' MINUTES))")
        f = w.filter(lambda x: x > 2).name("Filter")
        f.map(same, output_type=LONG).name("Map").print().name("select_1")
        """,
        True,
    ),
    # GROUP BY TUMBLE(...), MOD(price, 10) with chaining off: every operator a vertex.
    "group_window_by_an_expression_unchained": (
        flink_sql(
            "SET parallelism = 1;\nSET chaining = false;",
            BIDS,
            """
            CREATE TABLE o (k BIGINT, wend TIMESTAMP(3), n BIGINT)
              WITH ('connector' = 'console');
            INSERT INTO o SELECT MOD(price, 10) AS k,
              TUMBLE_END(bidtime, INTERVAL '1' MINUTE) AS wend, COUNT(*) AS n
            FROM bids GROUP BY TUMBLE(bidtime, INTERVAL '1' MINUTE), MOD(price, 10);
            """,
        ),
        """
        env.set_parallelism(1)
        env.disable_operator_chaining()
        k = source("bids").uid("src").map(lambda x: x % 10, output_type=LONG).name("Map")
        w = keyed_window(k, ASSIGNERS.TumblingEventTimeWindows.of(minutes(1)),
            "Window(TUMBLE(bidtime, INTERVAL '1' MINUTE))")
        w.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # UNNEST grouped into a sink that is named select_1, so the bare query's is select_2;
    # both read one source (a fork in its chain).
    "unnest_grouped_and_a_bare_query": (
        flink_sql(
            """
            SET parallelism = 2;
            CREATE TABLE orders (id STRING, tags ARRAY<STRING>)
              WITH ('connector' = 'files', 'path' = 'in/orders', 'format' = 'json',
                'uid' = 'src');
            CREATE TABLE select_1 (tag STRING, n BIGINT)
              WITH ('connector' = 'console', 'mode' = 'update');
            INSERT INTO select_1 SELECT t.tag, COUNT(*) AS n
              FROM orders CROSS JOIN UNNEST(tags) AS t (tag) GROUP BY t.tag;
            SELECT id FROM orders;
            """
        ),
        """
        env.set_parallelism(2)
        s = source("orders").uid("src")
        f = s.flat_map(lambda x: [x], output_type=LONG).name("Flat Map")
        a = keyed_aggregate(f)
        a.map(same, output_type=LONG).name("Map").print().name("select_1")
        s.map(same, output_type=LONG).name("Map").print().name("select_2")
        """,
        True,
    ),
    # UNION ALL of three SELECTs of one source into a wider sink: three Calcs chained to
    # the source (the later SELECTs' hidden views first), three REBALANCE inputs.
    "union_all_of_three_selects_of_one_source": (
        flink_sql(
            "SET parallelism = 2;",
            BIDS,
            """
            CREATE TABLE o (item STRING, price BIGINT)
              WITH ('connector' = 'console', 'parallelism' = '4');
            INSERT INTO o
            SELECT item, price FROM bids WHERE price > 100
            UNION ALL SELECT item, price FROM bids WHERE price < 10
            UNION ALL SELECT supplier_id, price + 1 FROM bids;
            """,
        ),
        """
        env.set_parallelism(2)
        s = source("bids").uid("src")
        second = s.filter(lambda x: x < 10).name("Filter").map(same, output_type=LONG)
        third = s.map(lambda x: x + 1, output_type=LONG).name("Map")
        first = s.filter(lambda x: x > 100).name("Filter").map(same, output_type=LONG)
        first.name("Map").union(second.name("Map"), third).print().name("o").set_parallelism(4)
        """,
        True,
    ),
    # A window table function over a computed time column with the WATERMARK on it.
    "tvf_over_a_computed_time_column": (
        flink_sql(
            """
            SET parallelism = 4;
            CREATE TABLE sales (auction BIGINT, price BIGINT, qty BIGINT, t STRING,
              total AS price * qty, ts AS CAST(t AS TIMESTAMP(3)),
              WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
              WITH ('connector' = 'datagen', 'parallelism' = '2', 'uid' = 'src');
            CREATE TABLE o (auction BIGINT, s BIGINT) WITH ('connector' = 'console');
            INSERT INTO o SELECT auction, SUM(total) AS s
            FROM TABLE(TUMBLE(TABLE sales, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
            GROUP BY window_start, window_end, auction;
            """
        ),
        """
        env.set_parallelism(4)
        s = source("sales").uid("src").set_parallelism(2)
        w = keyed_window(s, ASSIGNERS.TumblingEventTimeWindows.of(minutes(1)),
            "Window(TUMBLE(ts, INTERVAL '1' MINUTE))")
        w.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # An unkeyed TUMBLE at parallelism 1: windowAll's max parallelism 1 beside the Map's
    # unset one does not stop the chain.
    "unkeyed_window_at_parallelism_one": (
        flink_sql(
            "SET parallelism = 1;",
            BIDS,
            """
            CREATE TABLE o (wend TIMESTAMP(3), n BIGINT) WITH ('connector' = 'console');
            INSERT INTO o SELECT TUMBLE_END(bidtime, INTERVAL '1' MINUTE) AS wend, COUNT(*) AS n
            FROM bids GROUP BY TUMBLE(bidtime, INTERVAL '1' MINUTE);
            """,
        ),
        """
        env.set_parallelism(1)
        w = window_all(source("bids").uid("src"),
            ASSIGNERS.TumblingEventTimeWindows.of(minutes(1)),
            "Window(TUMBLE(bidtime, INTERVAL '1' MINUTE))")
        w.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # A windowed view read by two INSERTs (EXECUTE STATEMENT SET): the window's chain
    # forks, one branch regrouped by another key through a HASH exchange.
    "windowed_view_read_twice": (
        flink_sql(
            "SET parallelism = 2;",
            BIDS,
            """
            CREATE TABLE o1 (item STRING, total BIGINT) WITH ('connector' = 'console');
            CREATE TABLE o2 (n BIGINT, c BIGINT)
              WITH ('connector' = 'console', 'mode' = 'update', 'uid' = 'o2');
            CREATE TEMPORARY VIEW per_item AS
            SELECT item, SUM(price) AS total
            FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '1' MINUTE))
            GROUP BY window_start, window_end, item;
            EXECUTE STATEMENT SET BEGIN
            INSERT INTO o1 SELECT item, total FROM per_item WHERE total > 10;
            INSERT INTO o2 SELECT total AS n, COUNT(*) AS c FROM per_item GROUP BY total;
            END;
            """,
        ),
        """
        env.set_parallelism(2)
        w = keyed_window(source("bids").uid("src"),
            ASSIGNERS.TumblingEventTimeWindows.of(minutes(1)),
            "Window(TUMBLE(bidtime, INTERVAL '1' MINUTE))")
        v = w.map(same, output_type=LONG).name("Map")
        f = v.filter(lambda x: x > 10).name("Filter")
        f.map(same, output_type=LONG).name("Map").print().name("o1")
        a = keyed_aggregate(v)
        a.map(same, output_type=LONG).name("Map").print().name("o2").uid("o2")
        """,
        True,
    ),
    # execution.mode = 'batch' (Flink's BATCH runtime mode) over a bounded datagen.
    "tvf_tumble_in_batch_mode": (
        flink_sql(
            """
            SET execution.mode = 'batch';
            SET parallelism = 2;
            CREATE TABLE bids (
              bidtime TIMESTAMP(3), price BIGINT, item STRING, supplier_id STRING,
              WATERMARK FOR bidtime AS bidtime - INTERVAL '1' SECOND
            ) WITH ('connector' = 'datagen', 'number_of_rows' = '100', 'uid' = 'src');
            CREATE TABLE o (item STRING, total BIGINT)
              WITH ('connector' = 'console', 'parallelism' = '1');
            INSERT INTO o
            SELECT item, SUM(price) AS total
            FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
            GROUP BY window_start, window_end, item;
            """
        ),
        """
        from pyflink.datastream import RuntimeExecutionMode

        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(2)
        w = keyed_window(source("bids").uid("src"),
            ASSIGNERS.TumblingEventTimeWindows.of(minutes(10)),
            "Window(TUMBLE(bidtime, INTERVAL '10' MINUTES))")
        w.map(same, output_type=LONG).name("Map").print().name("o").set_parallelism(1)
        """,
        True,
    ),
    # BATCH mode with chaining off: the Window's edge to its Map is a default (unspecified)
    # forward edge that is not chained.
    "group_window_in_batch_mode_unchained": (
        flink_sql(
            """
            SET execution.mode = 'batch';
            SET chaining = false;
            SET parallelism = 2;
            CREATE TABLE bids (
              bidtime TIMESTAMP(3), price BIGINT, item STRING, supplier_id STRING,
              WATERMARK FOR bidtime AS bidtime - INTERVAL '1' SECOND
            ) WITH ('connector' = 'datagen', 'number_of_rows' = '100', 'parallelism' = '2',
              'uid' = 'src');
            CREATE TABLE o (item STRING, total BIGINT)
              WITH ('connector' = 'console', 'parallelism' = '2');
            INSERT INTO o SELECT item, SUM(price) AS total
            FROM bids GROUP BY TUMBLE(bidtime, INTERVAL '10' MINUTE), item;
            """
        ),
        """
        from pyflink.datastream import RuntimeExecutionMode

        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.disable_operator_chaining()
        env.set_parallelism(2)
        w = keyed_window(source("bids").uid("src").set_parallelism(2),
            ASSIGNERS.TumblingEventTimeWindows.of(minutes(10)),
            "Window(TUMBLE(bidtime, INTERVAL '10' MINUTE))")
        w.map(same, output_type=LONG).name("Map").print().name("o").set_parallelism(2)
        """,
        True,
    ),
    # Hints among a source's and a sink's Flink DDL options: uid, max_parallelism,
    # slot_sharing_group (inherited by the operators after the source), chaining.
    "hints_in_table_options": (
        flink_sql(
            "SET parallelism = 2;",
            """
            CREATE TABLE bids (
              bidtime TIMESTAMP(3), price BIGINT, item STRING, supplier_id STRING,
              WATERMARK FOR bidtime AS bidtime - INTERVAL '1' SECOND
            ) WITH ('connector' = 'datagen', 'uid' = 'src', 'max_parallelism' = '64',
              'slot_sharing_group' = 'ingest', 'chaining' = 'never');
            CREATE TABLE o (item STRING, n BIGINT)
              WITH ('connector' = 'console', 'slot_sharing_group' = 'out',
                'max_parallelism' = '32', 'mode' = 'update');
            INSERT INTO o SELECT item, COUNT(*) AS n FROM bids WHERE price > 1 GROUP BY item;
            """,
        ),
        """
        env.set_parallelism(2)
        s = (source("bids").uid("src").set_max_parallelism(64).slot_sharing_group("ingest")
            .disable_chaining())
        f = s.filter(lambda x: x > 1).name("Filter")
        a = keyed_aggregate(f)
        m = a.map(same, output_type=LONG).name("Map")
        o = m.print().name("o").slot_sharing_group("out")
        o._j_data_stream_sink.getTransformation().setMaxParallelism(32)  # not in PyFlink
        """,
        True,
    ),
    # A name among a source's and a sink's options: Flink's .name(...) of the source and
    # the sink.
    "name_hints_in_table_options": (
        flink_sql(
            "SET parallelism = 2;",
            """
            CREATE TABLE bids (price BIGINT, item STRING)
              WITH ('connector' = 'datagen', 'name' = 'bid feed');
            CREATE TABLE o (item STRING) WITH ('connector' = 'console', 'name' = 'printer');
            INSERT INTO o SELECT item FROM bids WHERE price > 1;
            """,
        ),
        """
        env.set_parallelism(2)
        f = source("bids").name("bid feed").filter(lambda x: x > 1).name("Filter")
        f.map(same, output_type=LONG).name("Map").print().name("printer")
        """,
        True,
    ),
    # GROUP BY over a subquery's UNION ALL of two SELECTs of sources of two parallelisms:
    # both inputs of the keyed aggregate HASH-partitioned.
    "group_by_over_a_union_all": (
        flink_sql(
            "SET parallelism = 3;",
            BIDS,
            """
            CREATE TABLE asks (ask_time TIMESTAMP(3), amount BIGINT, item STRING,
              WATERMARK FOR ask_time AS ask_time - INTERVAL '1' SECOND)
              WITH ('connector' = 'datagen', 'parallelism' = '1', 'uid' = 'asks');
            CREATE TABLE o (item STRING, n BIGINT)
              WITH ('connector' = 'console', 'mode' = 'update');
            INSERT INTO o SELECT item, COUNT(*) AS n FROM (
              SELECT item, price FROM bids UNION ALL SELECT item, amount FROM asks)
            GROUP BY item;
            """,
        ),
        """
        env.set_parallelism(3)
        b = source("bids").uid("src").map(same, output_type=LONG).name("Map")
        a = source("asks").uid("asks").set_parallelism(1).map(same, output_type=LONG)
        u = b.union(a.name("Map"))
        keyed_aggregate(u).map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # A ROW_NUMBER Top-N over a GROUP BY's rows into an upsert sink: two keyed operators,
    # the Rank re-partitioned by its PARTITION BY.
    "top_n_over_an_aggregate": (
        flink_sql(
            "SET parallelism = 2;",
            BIDS,
            """
            CREATE TABLE o (supplier_id STRING, total BIGINT,
              PRIMARY KEY (supplier_id) NOT ENFORCED)
              WITH ('connector' = 'files', 'path' = 'out/o', 'format' = 'json');
            INSERT INTO o SELECT supplier_id, total FROM (
              SELECT supplier_id, total,
                ROW_NUMBER() OVER (PARTITION BY supplier_id ORDER BY total DESC) AS rn
              FROM (SELECT supplier_id, item, SUM(price) AS total FROM bids
                GROUP BY supplier_id, item))
            WHERE rn <= 2;
            """,
        ),
        """
        env.set_parallelism(2)
        a = keyed_aggregate(source("bids").uid("src"))
        m = a.map(same, output_type=LONG).name("Map").map(same, output_type=LONG).name("Map")
        r = keyed_aggregate(m, "Rank(rankEnd=2, partitionBy=[supplier_id], orderBy=[total DESC])")
        r.map(same, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # Flink's late-data routing: CURRENT_WATERMARK in each INSERT's WHERE and a SELECT item
    # is part of a Calc (a Filter and a Map); its processor on Spark is not in Flink's graph.
    "current_watermark_routing": (
        flink_sql(
            """
            SET parallelism = 2;
            CREATE TEMPORARY TABLE bids (
              bidtime TIMESTAMP(3), price BIGINT, item STRING,
              WATERMARK FOR bidtime AS bidtime - INTERVAL '1' SECOND
            ) WITH ('connector' = 'datagen', 'uid' = 'src');
            CREATE TEMPORARY TABLE o1 (item STRING, price BIGINT)
              WITH ('connector' = 'console', 'uid' = 'o1');
            CREATE TEMPORARY TABLE o2 (item STRING, price BIGINT, wm TIMESTAMP(3))
              WITH ('connector' = 'console', 'uid' = 'o2');
            BEGIN STATEMENT SET;
            INSERT INTO o1 SELECT item, price FROM bids
              WHERE CURRENT_WATERMARK(bidtime) IS NULL OR bidtime > CURRENT_WATERMARK(bidtime);
            INSERT INTO o2 SELECT item, price, CURRENT_WATERMARK(bidtime) FROM bids
              WHERE bidtime <= CURRENT_WATERMARK(bidtime);
            END;
            """
        ),
        """
        env.set_parallelism(2)
        bids = source("bids").uid("src")
        f1 = bids.filter(lambda x: x > 0).name("Filter")
        f1.map(same, output_type=LONG).name("Map").print().name("o1").uid("o1")
        f2 = bids.filter(lambda x: x > 0).name("Filter")
        f2.map(same, output_type=LONG).name("Map").print().name("o2").uid("o2")
        """,
        True,
    ),
}
