"""Checkers for the exercises of lesson 13 (crash points, counterfactuals, the fault matrix):
each runs the explorer, the matrix or a counterfactual on the learner's answer."""

from __future__ import annotations

import numbers

from . import Stop, exercise

REQUEST = {"vendor_id": "v-42"}
APPROVE = {"approval": {"approved": True}}


def exactly_once(run, world):
    """The lesson's invariant: the run completes and every service made each effect once."""
    assert run.status == "completed", f"run {run.status}"
    for service in (world.erp, world.bank, world.email):
        assert service.duplicate_effects == 0, \
            f"{type(service).__name__}: {service.duplicate_effects} duplicate effect(s)"


def erp_keys_only(clock=None):
    """Exercise 13.1's world: the ERP honours idempotency keys, the bank and email do not."""
    from ..examples import onboarding
    world = onboarding.fresh_world(clock)
    world.bank.honor_keys = world.email.honor_keys = False
    return world


def _points(answer) -> set[tuple[int, str, str]]:
    if isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
        raise Stop("give the broken crash points as a set of (position, activity, point) "
                   "tuples, as section 1's assertion writes them")
    points = set()
    for item in answer:
        if not (isinstance(item, tuple) and len(item) == 3 and isinstance(item[0], int)
                and isinstance(item[1], str) and isinstance(item[2], str)):
            raise Stop(f"{item!r} is not a (position, activity, point) tuple such as "
                       f"(4, 'ask_approver', 'after_effect')")
        points.add(item)
    return points


@exercise("13.1", "Keys on one service",
          "the set of (position, activity, point) that break 'exactly once' when only the "
          "ERP honours idempotency keys")
def keys_on_one_service(answer):
    import durablelab as dl
    from ..examples import onboarding
    given = _points(answer)
    report = dl.explore_crashes(onboarding.onboard_vendor, REQUEST, exactly_once,
                                world=erp_keys_only, signals=APPROVE)
    truth = {(int(r.position), r.activity, r.point) for r in report.broken.itertuples()}
    right, extra, missing = given & truth, given - truth, truth - given
    if right:
        yield True, f"{len(right)} of the points you give really break"
    for position, activity, point in sorted(extra):
        yield False, (f"p{position} {activity} {point} holds: a crash there repeats no effect "
                      f"of a service that ignores keys")
    if missing:
        yield False, f"{len(missing)} point(s) that break are missing from your answer"


@exercise("13.2", "An outage that does not end",
          "the dl.RetryPolicy that ends with RunTimedOut, not ActivityFailed, when the 503s "
          "never stop (dl.fault_matrix(..., times=None, timeout=3600))")
def outage_that_does_not_end(policy):
    import durablelab as dl
    if not isinstance(policy, dl.RetryPolicy):
        raise Stop(f"give the policy itself (a dl.RetryPolicy), not {type(policy).__name__}")
    try:
        matrix = dl.fault_matrix({"yours": policy}, failures=["503"], times=None,
                                 timeout=3600)
    except dl.DurableLabError as exc:
        raise Stop(str(exc)) from None
    row = matrix.frame.iloc[0]
    if row.error_class == "RunTimedOut":
        yield True, (f"it retries until the run's time-out stops it: {int(row.attempts)} "
                     f"attempts in {row.virtual_duration:g} virtual seconds")
    else:
        yield False, (f"it gives up by itself after {int(row.attempts)} attempt(s) "
                      f"({row.error_class}): a policy with a limit fails with ActivityFailed")


def _recorded_400():
    """A run whose create_vendor got a 400, exported and loaded back as in section 5."""
    import durablelab as dl
    from ..examples import onboarding
    onboarding.fresh_world()
    with dl.Engine() as engine:
        run_id = engine.start(onboarding.onboard_vendor, REQUEST, run_id="bad-request", seed=3,
                              faults=dl.FaultPlan([dl.faults.Fail("create_vendor",
                                                                  status=400)]))
        engine.advance(3600)
        engine.signal(run_id, "approval", {"approved": True}, signal_id="click-1")
        engine.run_until_idle()
        return engine.run(run_id)


@exercise("13.3", "A counterfactual that cannot survive",
          "the number of times create_vendor is called when the run that got a 400 is "
          "replayed under IO, or under a policy without any limit (a number)")
def counterfactual_400(calls):
    import durablelab as dl
    from ..examples import onboarding
    if isinstance(calls, bool) or not isinstance(calls, numbers.Integral):
        raise Stop(f"give a whole number of calls, not {type(calls).__name__}")
    recorded = _recorded_400()
    counted = {}
    for name, policy in (("IO", onboarding.IO),
                         ("no limit", dl.RetryPolicy(max_attempts=None, initial=1.0))):
        again = dl.counterfactual(recorded, onboarding.onboard_vendor, policies=policy,
                                  world=onboarding.fresh_world)
        counted[name] = (int((again.attempts.activity == "create_vendor").sum()), again.status)
    (io_calls, io_status), (free_calls, free_status) = counted["IO"], counted["no limit"]
    if io_calls != free_calls or "completed" in (io_status, free_status):
        yield False, (f"the policies disagree here ({counted}): a 400 should end both the "
                      f"same way; that is a bug to report")
        return
    if calls == io_calls:
        yield True, (f"{calls}: under either policy create_vendor is called {calls} time(s) "
                     f"and the run fails")
        yield True, "so no policy would have survived it, whatever its max_attempts"
    elif calls == onboarding.IO.max_attempts:
        yield False, (f"{calls} is IO's max_attempts: that is how often it may try, not how "
                      f"often a 400 is tried")
    elif calls == 0:
        yield False, ("0 is not it: a 400 is the service's answer to a call that was made "
                      "(look at the attempts of create_vendor)")
    else:
        yield False, f"{calls} is not how often the counterfactuals call create_vendor"
