import importlib.util
import sys

import pytest

# A Python without the project's dependencies (the system python3, say) fails here with the
# fix, instead of with an ImportError deep inside the package.
_MISSING = [m for m in ("duckdb", "pandas", "pyarrow", "matplotlib", "pydantic", "hypothesis")
            if importlib.util.find_spec(m) is None]
if _MISSING:
    raise pytest.UsageError(
        f"{sys.executable} does not have durablelab's dependencies ({', '.join(_MISSING)} "
        f"missing). Run the tests as the README says, in the project's own environment: "
        f"python3 -m venv .venv && .venv/bin/pip install -e \".[test]\" && "
        f".venv/bin/python -m pytest")

import durablelab as dl  # noqa: E402


@pytest.fixture
def engine():
    """A fresh in-memory engine on a virtual clock starting at 0."""
    eng = dl.Engine()
    yield eng
    eng.close()


@pytest.fixture
def db_path(tmp_path):
    """A path for a private DuckDB file."""
    return str(tmp_path / "runs.duckdb")


# --- the fast lane --------------------------------------------------------------------------
# `pytest -m "not slow"` is for people changing the core: about a minute on two cores. Plain
# `pytest` (the README's command, and .ci/run) still runs everything. Slow are every notebook
# cell (nbval runs the lessons in a kernel), the modules below and the single tests after
# them; tests/test_fast_lane.py fails when a name here no longer matches a test.

SLOW_MODULES = {  # file name (a glob) -> why it is slow
    "test_kill9.py": "SIGKILLs a worker process mid-run, trial after trial",
    "test_dbos.py": "starts DBOS Transact and a throwaway PostgreSQL server",
    "test_sweep_dask.py": "starts a Dask cluster of worker processes and kills one",
    "test_browser.py": "runs every lesson with Run All in JupyterLab in a headless Chromium",
    "test_site.py": "opens every page of the built course site in a headless Chromium",
    "test_binder.py": "builds a fresh virtual environment from binder/ and runs a lesson",
    "test_wheel.py": "builds a wheel and serves its lessons from a fresh virtual environment",
    "test_agents_client.py": "the real openai client against a local HTTP server, real hangs",
    "test_pydantic_ai.py": "imports Pydantic AI (2-3 s), drives it against a local HTTP server "
                           "with real hangs, and explores 21 crash points of its agent",
    "test_exercises*.py": "every lesson's exercise checkers, each replaying lesson scenarios",
    "test_viz.py": "draws every figure with matplotlib, which the core never imports",
    "test_deploy.py": "the deploy simulator: many runs parked at each point, per test",
    "test_three_ways.py": "imports Pydantic AI and LangGraph (4-5 s), and explores the crash "
                          "points of a LangGraph graph",
}

SLOW_TESTS = {  # file -> {test function (all its parameters) -> why it is slow}
    "test_sticky.py": {
        "test_occ_clients_sweep_same_tables_over_seeds_and_delays":
            "Hypothesis: two sweeps per example, sticky and replayed",
        "test_histories_same_with_crash_and_signal_anywhere":
            "Hypothesis: two engines per crash and signal schedule",
    },
    "test_invariants.py": {
        "test_crashes_anywhere_keep_result_effects_and_no_rerun":
            "Hypothesis: 40 crash schedules per durability mode",
        "test_same_seed_plan_and_run_id_give_byte_identical_history":
            "Hypothesis: each example runs the workflow twice",
        "test_exit_mode_crashes_keep_key_honouring_effects_once":
            "Hypothesis: crash schedules in exit mode",
        "test_durable_engine_state_machine": "Hypothesis state machine",
    },
    "test_store_layout.py": {
        "test_events_round_trip_through_view_load_and_reopen":
            "Hypothesis: a DuckDB round trip per example",
        "test_process_death_after_checkpoints_keeps_every_acknowledged_step":
            "a child process writes 250 sync steps and dies",
    },
    "test_poisoned_values.py": {
        "test_any_json_value_round_trips_exactly_even_with_lone_surrogates":
            "Hypothesis: a store round trip per example",
    },
    "test_agents.py": {
        "test_crashes_never_double_an_effect_nor_repeat_a_recorded_model_call":
            "Hypothesis: an agent run through crash schedules per example",
    },
    "test_sweep_data.py": {
        "test_the_data_form_rebuilds_the_same_sweep": "Hypothesis: a sweep spec per example",
        "test_a_thread_pool_executor_gives_the_serial_table": "a sweep of 60 seeds, twice",
    },
    "test_figures_in_notebooks.py": {
        "test_every_public_plotting_call_shows_a_picture_in_a_notebook":
            "a sweep, crash explorations, a deploy and a PNG per plotting call",
        "test_a_crash_reports_broken_row_timeline_shows_a_picture":
            "a crash exploration and a PNG",
    },
    "test_fast_lane.py": {
        "test_the_fast_lane_leaves_out_notebooks_and_slow_modules_and_tests":
            "collects the whole suite again in a child pytest",
    },
    "test_fault_rules.py": {
        "test_fail_draws_are_a_pure_function_of_seed_rule_position_attempt":
            "Hypothesis: 30 fault plans",
    },
    "test_draws.py": {
        "test_the_same_key_gives_the_same_numbers_in_range": "Hypothesis",
        "test_the_numbers_are_the_same_in_another_process": "a child Python process",
    },
    "test_bad_input.py": {
        "test_second_process_gets_a_clear_lock_error": "a child Python process holds the file",
    },
    "test_langgraph.py": {
        "test_a_crash_outside_the_explorer_ends_the_process_as_kill_9":
            "a child Python process imports LangGraph and dies with exit status 137",
    },
    "test_heartbeat.py": {
        "test_details_survive_kill_9_and_the_recovered_attempt_resumes":
            "kill -9 of a worker process",
    },
    "test_cli.py": {
        "test_lab_serves_the_lessons_on_localhost_and_stops": "starts JupyterLab",
        "test_commands_the_demo_prints_read_its_store_and_change_nothing":
            "one `durablelab` process per command the demo prints",
        "test_real_process_exits_1_for_a_failure_and_2_for_usage":
            "several `durablelab` processes",
        "test_show_into_a_pipe_closed_early_ends_quietly": "a `durablelab` process",
    },
    "test_catalogue.py": {
        "test_the_same_hash_seed_or_a_sorted_order_replays": "two Python processes per case",
        "test_hash_order_diverges_under_another_pythonhashseed": "two Python processes per case",
        "test_several_workflows_share_the_two_processes_and_keep_their_own_fate":
            "two Python processes",
    },
    "test_sweep.py": {
        "test_isolated_runs_measure_what_a_fresh_engine_per_run_measures":
            "makes every run of a sweep again in a fresh engine",
        "test_a_sweep_killed_with_sigkill_resumes_without_redoing_finished_cells":
            "a sweep process killed with SIGKILL",
        "test_spawned_workers_rebuild_the_sweep_from_data_and_give_the_serial_table":
            "spawned worker processes",
        "test_processes_give_exactly_the_serial_results": "worker processes",
        "test_forked_workers_inherit_a_notebook_style_workflow_world_and_factory_instance":
            "forked worker processes",
    },
}


def is_slow(item) -> bool:
    """True for a notebook cell, an item of a SLOW_MODULES file or one of SLOW_TESTS."""
    path = getattr(item, "path", None)
    if path is None:
        return False
    if path.suffix == ".ipynb":
        return True
    if any(path.match(pattern) for pattern in SLOW_MODULES):
        return True
    # The module-level name: a function (with or without [parameters]) or a TestCase class.
    name = item.nodeid.split("::")[1].split("[")[0] if "::" in item.nodeid else ""
    return name in SLOW_TESTS.get(path.name, {})


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by `-m`
def pytest_collection_modifyitems(items):
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)
