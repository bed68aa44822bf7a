"""Checkers for the exercises of lesson 12 (experiments): each runs the lesson's sweep on the
learner's policy and reads the answer off the table, as the learner would."""

from __future__ import annotations

import dataclasses

from . import Stop, exercise

#: 12.1: the storm of section 1: 100 tickets x 3 seeds share one rate-limited model.
STORM_TICKETS, STORM_SEEDS = 100, 3
MAX_ATTEMPTS, TARGET = 4, 0.95
#: 12.3: section 4's outage (the model's first three attempts fail), 6 tickets x 12 seeds.
PRESET = "langgraph-default"


def _policy(answer, what: str):
    import durablelab as dl
    if not isinstance(answer, dl.RetryPolicy):
        raise Stop(f"give {what} as a dl.RetryPolicy, not {type(answer).__name__}")
    return answer


def storm_success(policy) -> float:
    """The success rate of `policy` in section 1's contended storm."""
    import durablelab as dl
    from ..examples import storm
    shared = dl.sweep(storm.triage, storm.tickets(STORM_TICKETS), policies={"yours": policy},
                      seeds=range(STORM_SEEDS), world=storm.world, contention=True)
    return float(shared.cells.success_rate.iloc[0])


@exercise("12.1", "Ride out the storm in four attempts",
          f"a dl.RetryPolicy with at most {MAX_ATTEMPTS} attempts that gets at least "
          f"{TARGET:.0%} of section 1's 300 contended runs through")
def ride_out_the_storm(policy):
    policy = _policy(policy, "the policy")
    if policy.max_attempts is None or policy.max_attempts > MAX_ATTEMPTS:
        raise Stop(f"max_attempts={policy.max_attempts}: the exercise allows at most "
                   f"{MAX_ATTEMPTS} attempts (more attempts get through by brute force, and "
                   f"each one is another request to a model that is already overloaded)")
    yield True, f"{policy.max_attempts} attempts: within the limit"
    rate = storm_success(policy)
    if rate >= TARGET:
        yield True, f"{rate:.1%} of the 300 runs complete in the shared storm"
        return
    if policy.jitter == "none":
        yield False, (f"only {rate:.1%} complete: without jitter the runs that failed "
                      f"together come back together, whatever the backoff")
    else:
        yield False, (f"only {rate:.1%} complete: the retries are not spread over enough "
                      f"seconds for a model that serves 20 requests a second; look at the "
                      f"load plot")


def outage_success(policy) -> tuple[float, float]:
    """(success rate, p95) of `policy` under section 4's outage plan."""
    import durablelab as dl
    from ..examples import storm
    plan = dl.FaultPlan([dl.faults.ServerError("model", attempts=[1, 2, 3])])
    cells = dl.sweep(storm.triage, storm.tickets(6), policies={"yours": policy},
                     fault_plans={"outage": plan}, seeds=range(12), world=storm.world).cells
    return float(cells.success_rate.iloc[0]), float(cells.p95.iloc[0])


@exercise("12.3", "LangGraph's default through the outage",
          "langgraph-default with only its max_attempts changed (dataclasses.replace), "
          "as few as survive section 4's outage")
def langgraph_through_the_outage(policy):
    import durablelab as dl
    policy = _policy(policy, "the changed preset")
    preset = dl.presets[PRESET]
    changed = [f.name for f in dataclasses.fields(preset)
               if f.name != "max_attempts" and getattr(policy, f.name) != getattr(preset, f.name)]
    if changed:
        raise Stop(f"this is not {PRESET} with more attempts: {', '.join(changed)} differ "
                   f"from the preset's (use dataclasses.replace(preset, max_attempts=...))")
    if policy.max_attempts is None:
        raise Stop("max_attempts=None retries without limit; the exercise asks how many "
                   "attempts are enough")
    rate, p95 = outage_success(policy)
    if rate < 1.0:
        yield False, (f"with max_attempts={policy.max_attempts}, {rate:.0%} of the runs "
                      f"survive the outage: count the attempts the outage takes")
        return
    yield True, (f"with max_attempts={policy.max_attempts} every run survives the outage "
                 f"(p95 {p95:.1f} virtual seconds)")
    fewer, _ = outage_success(dataclasses.replace(policy, max_attempts=policy.max_attempts - 1))
    yield fewer < 1.0, ("and one attempt fewer would not" if fewer < 1.0 else
                        "but fewer attempts survive too: the exercise asks for as few as "
                        "are enough")
