"""The lab's instruments: experiments on one workflow that the engine itself does not need.

- `crashes`: `dl.explore_crashes`, a run per crash point (and per pair of them), each
  checked against an invariant: deterministic simulation testing in the small;
- `matrix`: `dl.fault_matrix`, failure kinds against retry policies;
- `counterfactual`: `dl.counterfactual`, a recorded run again under other policies, meeting
  exactly the failures it recorded;
- `amplification`: `dl.retry_amplification`, client retries inside engine retries;
- `deploy`: `simulate_deploy`, a new version deployed under runs parked mid-flight.

Each is reached as ``dl.<name>`` too; nothing here is imported until it is used.
"""
