"""A research agent: the worked example of lesson 15 (parallel tools and sub-agents).

Asked a question, the agent buys access to two paywalled papers (two charges, started at
once), searches a small library, has a model read every document it found (a fan-out with
`ctx.map`, at most `limit` reads in flight), and hands the notes to a sub-agent, a child
run of `write_report`, which drafts the answer. The purchases sit in a saga: if the run
fails or a person cancels it, both charges are refunded.

The world outside the worker is a `ResearchWorld`: one model behind a token bucket
(``RATE`` requests a virtual second, ``BURST`` at once), so an agent that reads every
document at the same instant meets HTTP 429s, and a payments service that honours
idempotency keys or not. `world(clock)` is the factory `dl.explore_crashes`, `dl.sweep`
and ``Engine(world=...)`` take; activities reach it as `ctx.world`. `LATENCY` is how long
each call takes in this world, as a fault plan, so a timeline shows calls that overlap.
"""

from __future__ import annotations

import durablelab as dl
from durablelab.faults import Latency
from durablelab.sim import Payments, SimLLM, TokenBucket

#: the model's rate limit: requests per virtual second, and how many at once.
RATE, BURST = 2.0, 2

#: the policy of every model call: patient enough to outlast a burst of 429s.
MODEL = dl.RetryPolicy(max_attempts=6, initial=1.0, backoff=2.0, max_interval=30)


#: how long each call takes in this world (virtual seconds): a payment half a second,
#: reading one document one second, drafting the report two.
LATENCY = dl.FaultPlan([Latency("buy", seconds=0.5), Latency("read", seconds=1.0),
                        Latency("draft", seconds=2.0)])

#: the library the agent searches: titles of retry and durability papers and posts.
LIBRARY = [
    "Exponential Backoff And Jitter",
    "Timeouts, retries and backoff with jitter",
    "Metastable Failures in Distributed Systems",
    "The Tail at Scale",
    "Addressing Cascading Failures",
    "Handling Overload",
    "Making retries safe with idempotent APIs",
    "Designing robust and predictable APIs with idempotency",
    "Sagas",
    "Life beyond Distributed Transactions",
    "Building durable workflows",
    "Rate limiting strategies and techniques",
]

#: the model's answers: a summary for a reading, an answer for a draft.
SCENARIO = {
    "version": 1,
    "description": "the research agent of lesson 15",
    "answers": [
        {"match": "^Summarise", "answer": "Retries need a wait, jitter and a limit."},
        {"match": "^Answer", "answer": "Cap what is in flight, jitter the waits, and give "
                                       "every effect an idempotency key."},
    ],
    "default": "I don't have an answer for that.",
}


class ResearchWorld:
    """The systems outside the worker: a rate-limited model, the library and payments."""

    def __init__(self, clock, honor_keys: bool = True, rate: float = RATE,
                 burst: int = BURST):
        self.llm = SimLLM("sim-small", clock=clock, scenario=SCENARIO,
                          rate_limit=TokenBucket(rate, burst))
        self.payments = Payments(honor_keys=honor_keys)

    def search(self, question: str, k: int = len(LIBRARY)) -> list[str]:
        """The titles of the first `k` documents in the library (the search is not the
        point of the lesson, so it finds the same ones for every question)."""
        return LIBRARY[:k]

    def read(self, title: str, idempotency_key: str | None = None) -> dict:
        """Have the model read one document: ``{"title", "summary", "tokens"}``. Raises
        `dl.RateLimited` (HTTP 429 with Retry-After) when the model's bucket is empty."""
        answer = self.llm.complete(f"Summarise the document {title!r}",
                                   idempotency_key=idempotency_key)
        usage = answer["usage"]
        return {"title": title, "summary": answer["text"],
                "tokens": usage["input_tokens"] + usage["output_tokens"]}

    def draft(self, question: str, notes: list[dict],
              idempotency_key: str | None = None) -> str:
        """Have the model draft an answer to `question` from the notes."""
        prompt = f"Answer {question!r} from these notes: " + " ".join(
            n["summary"] for n in notes)
        return self.llm.complete(prompt, idempotency_key=idempotency_key)["text"]


def world(clock, honor_keys: bool = True) -> ResearchWorld:
    """The world factory: a fresh `ResearchWorld` on the engine's clock. Use
    ``functools.partial(world, honor_keys=False)`` for a payments service that ignores
    idempotency keys."""
    return ResearchWorld(clock, honor_keys=honor_keys)


@dl.workflow
def write_report(ctx: dl.Context, task: dict) -> dict:
    """The sub-agent: drafts the answer from the notes, in a run of its own."""
    text = ctx.activity("draft", ctx.world.draft, task["question"], task["notes"],
                        policy=MODEL)
    return {"answer": text, "sources": [n["title"] for n in task["notes"]]}


@dl.workflow
def research(ctx: dl.Context, request: dict) -> dict:
    """Buy two papers at once, read every document found (at most ``request["limit"]``
    at a time), and have a child run write the report; refund the papers if anything
    fails or the run is cancelled."""
    with ctx.saga() as saga:
        bought = [ctx.start_activity("buy", ctx.world.payments.charge, request["customer"],
                                     price) for price in request["paywalled"].values()]
        for receipt in ctx.gather(*bought):
            saga.add("refund", ctx.world.payments.refund, receipt["id"])
        titles = ctx.activity("search", ctx.world.search, request["question"],
                              request.get("documents", len(LIBRARY)))
        notes = ctx.map("read", ctx.world.read, titles, limit=request.get("limit"),
                        policy=MODEL)
        report = ctx.child(write_report, {"question": request["question"], "notes": notes})
    return {**report, "paid": sum(request["paywalled"].values())}


def request(limit: int | None = 2, documents: int = len(LIBRARY)) -> dict:
    """The lesson's request: a question, the customer who pays, and two paywalled papers
    with their prices in dollars."""
    return {"question": "How should an agent retry a rate-limited model?",
            "customer": "acme", "paywalled": {"Metastable Failures in Distributed Systems": 4.0,
                                              "The Tail at Scale": 6.0},
            "documents": documents, "limit": limit}
