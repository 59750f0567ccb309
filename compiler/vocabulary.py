"""The compiler's words, each defined once: step kinds, transformation and node kinds,
operators, partitioners, chaining strategies, and which of them hold state.

They are ``StrEnum``s so that plans, snapshots and JSON keep the same text; compare
members, not string literals, so that a misspelt kind is a type error, not a branch that
never runs.
"""

from __future__ import annotations

from enum import StrEnum


class StepKind(StrEnum):
    """What a checked pipe step does (``program.Step.kind``)."""

    WHERE = "where"
    SELECT = "select"
    EXTEND = "extend"
    #: SET col = expr: replaces existing columns in place (BigQuery's pipe SET).
    SET = "set"
    DROP = "drop"
    RENAME = "rename"
    EXPLODE = "explode"
    KEY_BY = "key_by"
    PARTITION = "partition"
    PARTITION_BY = "partition_by"
    WINDOW_AGGREGATE = "window_aggregate"
    AGGREGATE = "aggregate"
    DEDUPLICATE = "deduplicate"
    #: A SQL SELECT's OVER aggregates (Flink's OverAggregate).
    OVER = "over"
    #: MATCH_RECOGNIZE (Flink's Match: its CEP operator per key).
    MATCH = "match"
    #: TOP n BY ... (Flink's Rank), and after a WINDOW (Flink's WindowRank).
    TOP = "top"
    WINDOW_TOP = "window_top"
    JOIN = "join"
    #: A JOIN of a stream with a ``CREATE TABLE``: Flink's join with a bounded input,
    #: Spark's stateless stream-static join.
    DIMENSION_JOIN = "dimension_join"
    UNION = "union"
    ROUTE = "route"


#: Steps that keep state between records (a keyed operator on Flink, a stateful
#: operator with a state store on Spark).
STATEFUL_STEPS = frozenset(
    {
        StepKind.AGGREGATE,
        StepKind.WINDOW_AGGREGATE,
        StepKind.DEDUPLICATE,
        StepKind.OVER,
        StepKind.MATCH,
        StepKind.JOIN,
        StepKind.TOP,
        StepKind.WINDOW_TOP,
    }
)


class TransformationKind(StrEnum):
    """Flink's Transformation classes, as flowc names them."""

    SOURCE = "source"
    ONE_INPUT = "one_input"
    TWO_INPUT = "two_input"
    PARTITION = "partition"
    SIDE_OUTPUT = "side_output"
    UNION = "union"
    SINK = "sink"


#: Transformations that become no StreamNode of their own.
VIRTUAL_TRANSFORMATIONS = frozenset(
    {TransformationKind.PARTITION, TransformationKind.SIDE_OUTPUT, TransformationKind.UNION}
)

#: Transformations that Flink's environment lists (``env.getTransformations()``).
PHYSICAL_TRANSFORMATIONS = frozenset(
    {TransformationKind.ONE_INPUT, TransformationKind.TWO_INPUT, TransformationKind.SINK}
)


class NodeKind(StrEnum):
    """A StreamNode's role."""

    SOURCE = "source"
    OPERATOR = "operator"
    SINK = "sink"


class Operator(StrEnum):
    """The operator a physical transformation runs (its StreamNode's ``operator``)."""

    SOURCE = "source"
    SINK = "sink"
    FILTER = "filter"
    MAP = "map"
    FLAT_MAP = "flat_map"
    KEYED_AGGREGATE = "keyed_aggregate"
    AGGREGATE = "aggregate"
    WINDOW = "window"
    DEDUPLICATE = "deduplicate"
    JOIN = "join"
    RANK = "rank"
    WINDOW_RANK = "window_rank"
    OVER_AGGREGATE = "over_aggregate"
    MATCH = "match"
    PROCESS = "process"


#: Operators that keep state (each is one stateful operator of a Spark query).
STATEFUL_OPERATORS = frozenset(
    {
        Operator.KEYED_AGGREGATE,
        Operator.AGGREGATE,
        Operator.WINDOW,
        Operator.DEDUPLICATE,
        Operator.JOIN,
        Operator.RANK,
        Operator.WINDOW_RANK,
        Operator.OVER_AGGREGATE,
        Operator.MATCH,
    }
)


class StateKind(StrEnum):
    """What a stateful operator keeps (``StatefulOperator.kind``): finer than its
    operator, since a session window's or a global aggregate's state is its own kind."""

    KEYED_AGGREGATE = "keyed_aggregate"
    GLOBAL_AGGREGATE = "global_aggregate"
    WINDOW_AGGREGATE = "window_aggregate"
    SESSION_WINDOW = "session_window"
    DEDUPLICATE = "deduplicate"
    JOIN = "join"
    RANK = "rank"
    WINDOW_RANK = "window_rank"
    OVER_AGGREGATE = "over_aggregate"
    MATCH = "match"


class Partitioner(StrEnum):
    """Flink's StreamPartitioners, by the name their ``toString`` prints."""

    FORWARD = "FORWARD"
    REBALANCE = "REBALANCE"
    RESCALE = "RESCALE"
    SHUFFLE = "SHUFFLE"
    BROADCAST = "BROADCAST"
    GLOBAL = "GLOBAL"
    HASH = "HASH"
    CUSTOM = "CUSTOM"  # PARTITION BY: Flink's partitionCustom


#: Partitioners whose edge connects each producer to a subset of consumers.
POINTWISE_PARTITIONERS = frozenset({Partitioner.FORWARD, Partitioner.RESCALE})


class ChainingStrategy(StrEnum):
    """Flink's ChainingStrategy."""

    ALWAYS = "ALWAYS"
    HEAD = "HEAD"
    NEVER = "NEVER"


#: The ``chaining`` hint's values, and the strategy each sets.
CHAINING_HINTS: dict[str, ChainingStrategy] = {
    "always": ChainingStrategy.ALWAYS,
    "new_chain": ChainingStrategy.HEAD,
    "never": ChainingStrategy.NEVER,
}


class WindowKind(StrEnum):
    """A WINDOW step's function, upper case as written (``ast.Window.kind``)."""

    TUMBLE = "TUMBLE"
    HOP = "HOP"
    SESSION = "SESSION"
    CUMULATE = "CUMULATE"


class JoinKind(StrEnum):
    """A JOIN step's kind (``ast.Join.kind``)."""

    INNER = "INNER"
    LEFT = "LEFT"
    RIGHT = "RIGHT"
    FULL = "FULL"


class LiteralKind(StrEnum):
    """A literal in SET or WITH (...) (``ast.Value.kind``)."""

    STRING = "string"
    NUMBER = "number"
    WORD = "word"  # an unquoted word: true, false, a duration such as 10s


class DefinitionKind(StrEnum):
    """What a program's name defines."""

    SOURCE = "source"
    VIEW = "view"
    SINK = "sink"
