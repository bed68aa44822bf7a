"""A day of a support agent fleet: the worked example of lesson 16 (operating durable agents).

Each run answers one support ticket. The agent looks the order up in a flaky order service,
reads the ticket's attachment if it has one (a few are huge: a product manual, a device
log), asks a simulated model (`SimLLM`) to draft the answer, and then, depending on the
ticket, waits for people:

- a damaged item: it asks the customer for a photo and waits up to ``REPLY`` (three days)
  for the reply, then closes the ticket if none came;
- a refund: it waits up to ``APPROVAL`` (four hours) for a supervisor's approval, then
  hands the ticket to the team lead if none came.

The world (`SupportWorld`) is shared by every run of the day: one model behind one token
bucket (``RATE`` requests a virtual second, ``BURST`` at once), so the morning's backlog of
tickets meets 429s; an order service that answers 503 to about one request in five; a
payments and an email service with ledgers. `Day` is the day itself in virtual time:
tickets arriving (a backlog at opening time, then through the working day) and the people
who answer (supervisors only while at work, customers whenever they like, some never),
all drawn from one seed, so the same day happens on every run of the lesson.
"""

from __future__ import annotations

import random

import durablelab as dl
from durablelab.sim import Email, Payments, Service, SimLLM
from durablelab.sim.llm import TokenBucket

HOUR, DAY = 3600.0, 86400.0
#: the working day: the overnight backlog lands at OPEN_AT, supervisors answer until CLOSE_AT.
OPEN_AT, CLOSE_AT = 8 * HOUR, 17.5 * HOUR
#: how long a refund waits for a supervisor, and a damaged item for the customer's photo.
APPROVAL, REPLY = 4 * HOUR, 3 * DAY
#: the model's rate limit, shared by every run: requests per virtual second, and at once.
RATE, BURST = 1.0, 5
#: the model call's policy: 429s wait at least their Retry-After, and up to a minute.
MODEL = dl.RetryPolicy(max_attempts=8, initial=1.0, backoff=2.0, max_interval=60)
#: the tools' policy: a 503 from the order service is retried after 2, 4, 8 ... seconds.
TOOL = dl.RetryPolicy(max_attempts=6, initial=2.0, backoff=2.0, max_interval=60)
#: what the model drafts, by the ticket's words (a `SimLLM` scenario).
SCENARIO = {"version": 1, "answers": [
    {"match": "where is my order", "answer": "Your order has left our warehouse and should "
                                             "reach you within two working days."},
    {"match": "refund", "answer": "I have asked a supervisor to approve your refund; you "
                                  "will hear from us today."},
    {"match": "broken|damaged", "answer": "I am sorry the kettle arrived broken. A photo of "
                                          "the damage lets us refund you at once."}],
    "default": "Thank you for writing to us; I have looked into your order."}
#: the attachments that are not small: file name -> size in characters.
DOCUMENTS = {"kettle-manual.txt": 320_000, "router-debug.log": 180_000}


def document(name: str) -> str:
    """The text of an attachment: words drawn from its name, the same on every call."""
    rng = random.Random(name)
    words = ("descale", "filter", "element", "warranty", "boil", "lid", "base", "error",
             "firmware", "uplink", "retry", "packet", "timeout", "reset", "page", "section")
    out, size = [], 0
    while size <= DOCUMENTS[name]:       # joined, the words are size - 1 characters
        word = rng.choice(words)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:DOCUMENTS[name]]


class Orders(Service):
    """The order service: looks an order up; sometimes answers 503 before doing anything."""

    prefix = "ord"

    def lookup(self, order_id: str, idempotency_key: str | None = None) -> dict:
        return self.perform("lookup", {"order_id": order_id, "amount": 42.5})


class SupportWorld:
    """The systems outside the workers, shared by every run of the day."""

    def __init__(self, clock, *, seed: int = 0, flaky: float = 0.2, rate: float = RATE,
                 burst: int = BURST):
        self.llm = SimLLM("sim-small", clock=clock, seed=seed, scenario=SCENARIO,
                          rate_limit=TokenBucket(rate, burst))
        self.orders = Orders(failure_rate=flaky, seed=seed)
        self.payments = Payments()
        self.email = Email()
        self._documents: dict[str, str] = {}

    def read_attachment(self, name: str) -> dict:
        """The attachment's whole text, as a document store would hand it back."""
        if name not in self._documents:
            self._documents[name] = document(name)
        return {"name": name, "text": self._documents[name]}


def world(clock) -> SupportWorld:
    """A fresh `SupportWorld` on the engine's clock (`dl.Engine(world=...)` takes it)."""
    return SupportWorld(clock)


def support_ticket(ctx: dl.Context, ticket: dict) -> dict:
    world = ctx.world
    order = ctx.activity("lookup_order", world.orders.lookup, ticket["order"], policy=TOOL)
    context = ""
    if ticket["attachment"]:
        attached = ctx.activity("read_attachment", world.read_attachment,
                                ticket["attachment"], policy=TOOL)
        context = " ".join(attached["text"].split()[:200])     # the model reads an excerpt
    draft = ctx.activity("model", world.llm.complete,
                         f"Draft a reply to ticket {ticket['id']} about order "
                         f"{order['order_id']}: {ticket['text']} {context}", policy=MODEL)
    if ticket["kind"] == "damaged":
        ctx.activity("ask_for_photo", world.email.send, ticket["customer"],
                     f"{ticket['id']}: could you send a photo of the damage?")
        if ctx.wait_signal("customer_reply", timeout=REPLY) is None:
            ctx.activity("close_ticket", world.email.send, ticket["customer"],
                         f"{ticket['id']}: closed, no reply in three days")
            return {"ticket": ticket["id"], "outcome": "closed without reply"}
    if ticket["kind"] in ("refund", "damaged"):
        decision = ctx.wait_signal("approval", timeout=APPROVAL)
        if decision is None:
            ctx.activity("escalate", world.email.send, "team-lead@example.com",
                         f"{ticket['id']}: refund waited four hours for approval")
            return {"ticket": ticket["id"], "outcome": "escalated"}
        if decision["approved"]:
            ctx.activity("refund", world.payments.refund, order["id"])
    ctx.activity("send_reply", world.email.send, ticket["customer"],
                 f"{ticket['id']}: {draft['text'][:60]}")
    return {"ticket": ticket["id"], "outcome": "answered"}


dl.workflow(support_ticket)


def tickets(n: int = 200, seed: int = 17) -> list[dict]:
    """`n` tickets with their arrival times: a quarter of them are the overnight backlog,
    all there at `OPEN_AT`; the rest arrive through the working day. About half are
    questions, a quarter refunds, a fifth damaged items; a few attach a huge document."""
    rng = random.Random(f"tickets:{seed}")
    backlog = n // 4
    out = []
    for i in range(n):
        at = OPEN_AT if i < backlog else OPEN_AT + (CLOSE_AT - OPEN_AT - HOUR) * (
            i - backlog + rng.random()) / (n - backlog)
        draw = rng.random()
        kind = ("question" if draw < 0.55 else "refund" if draw < 0.8 else "damaged")
        attachment = None
        if kind == "question" and rng.random() < 0.06:
            attachment = rng.choice(sorted(DOCUMENTS))
        out.append({"id": f"T-{i + 1:04d}", "at": round(at, 3), "kind": kind,
                    "order": f"A-{2000 + i}", "customer": f"customer-{i + 1}@example.com",
                    "text": {"question": "Where is my order?",
                             "refund": "Please refund my order, I changed my mind.",
                             "damaged": "The kettle arrived broken."}[kind],
                    "attachment": attachment})
    return out


class Day:
    """The day in virtual time: tickets start at their arrival, and people answer.

    Supervisors approve about three refunds in four, 10 minutes to 3 hours after the
    question reached them, but only at work (`OPEN_AT` to `CLOSE_AT`): an approval that
    would fall later is never given, and that refund is escalated at its deadline. Customers send
    their photo for about three damaged items in five, 30 minutes to 2 days after the
    ticket came in, at any hour; the others never answer. Everything is drawn from `seed`.
    `run_until(instant)` starts, signals and advances the engine up to `instant`.
    """

    def __init__(self, engine, n: int = 200, seed: int = 17, workflow=support_ticket):
        self.engine, self.workflow = engine, workflow
        self.tickets = tickets(n, seed)
        rng = random.Random(f"people:{seed}")
        plan = []
        for t in self.tickets:
            plan.append((t["at"], 0, "start", t["id"], t))
            asked = t["at"]
            if t["kind"] == "damaged":
                if rng.random() < 0.6:
                    asked = t["at"] + rng.uniform(0.5 * HOUR, 2 * DAY)
                    plan.append((asked, 1, "customer_reply", t["id"], {"photo": "jpg"}))
                else:
                    continue           # no photo: the ticket closes after three days
            if t["kind"] in ("refund", "damaged") and rng.random() < 0.75:
                click = asked + rng.uniform(10 * 60, 3 * HOUR)
                if OPEN_AT <= click % DAY <= CLOSE_AT:       # nobody approves at night
                    plan.append((click, 1, "approval", t["id"], {"approved": True}))
        self.plan = sorted(plan, key=lambda item: item[:2] + (item[3],))
        self._next = 0

    def run_until(self, instant: float) -> None:
        """Play the day's arrivals and answers up to `instant` (seconds), in order."""
        engine = self.engine
        while self._next < len(self.plan) and self.plan[self._next][0] <= instant:
            at, _, what, run_id, value = self.plan[self._next]
            self._next += 1
            engine.advance(max(0.0, at - engine.clock.now()))
            if what == "start":
                engine.start(self.workflow, value, run_id=run_id)
            else:
                engine.signal(run_id, what, value, signal_id=f"{run_id}:{what}")
        engine.advance(max(0.0, instant - engine.clock.now()))


#: a long ticket thread: 160 messages, about 9 kB of text.
THREAD = "\n".join(f"customer: message {i} about the kettle that arrived broken"
                   for i in range(160))


def load_thread(ticket_id: str) -> dict:
    """The whole thread of a ticket, as a ticket system's API would return it."""
    return {"ticket": ticket_id, "transcript": THREAD}

