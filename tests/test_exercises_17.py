"""Lesson 17's checkers refuse the wrong answers learners most often give: crash windows that
count a charge the payment service answers from its key, or that forget the receipt's own
window; a graph that is the lesson's own (its tools node re-runs the charge after a crash at
the receipt), one that wraps no call, and one that raises."""

import pytest
from exercise_cases import refuses

pytest.importorskip("langgraph.checkpoint.sqlite", reason="the LangGraph extra is not "
                    "installed: pip install -e '.[langgraph]'")

from durablelab.examples import three_ways  # noqa: E402


def unwrapped(checkpointer, world):
    """The lesson's graph with no call wrapped by an injector: the explorer finds no unit."""
    from langgraph.graph import END, START, StateGraph
    graph = StateGraph(three_ways.State)
    graph.add_node("everything", lambda state: {"messages": []})
    graph.add_edge(START, "everything")
    graph.add_edge("everything", END)
    return graph.compile(checkpointer=checkpointer)


def raising(checkpointer, world):
    raise RuntimeError("the graph cannot be built")


# (exercise, a wrong answer, words the verdict must say)
WRONG = [
    ("17.1", {("charge_card", "after_effect"), ("send_receipt", "after_effect")},
     "honours the key"),
    ("17.1", {("send_receipt", "before_activity"), ("send_receipt", "after_effect")},
     "was the receipt sent yet"),
    ("17.1", set(), "missing from your answer"),
    ("17.1", {("send_receipt", "after effect")}, "is not a crash point"),
    ("17.1", {("send_receipt", "after_effect"), ("send_receipt", "after_record")},
     "has no after_record point"),
    ("17.1", "send_receipt", "give the crash windows as a set"),
    ("17.2", three_ways.build_graph, "LangGraph runs the whole node again"),
    ("17.2", unwrapped, "ran no unit that an injector wraps"),
    ("17.2", raising, "your graph raised RuntimeError"),
    ("17.2", "build_graph", "give the function itself"),
]


@pytest.mark.parametrize("exercise_id, answer, words", WRONG,
                         ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_checker_refuses_a_common_wrong_answer(exercise_id, answer, words):
    refuses(exercise_id, answer, words, secret=None)
