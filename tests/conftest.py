"""Suite-wide configuration. Helpers live in ``tests.helpers``.

Markers (registered in pyproject.toml) let a developer run the suite in pieces: the
directories mark their own tests (``browser``, ``postgres``, ``faults``, ``fuzz``),
and tests that take 3 s or more are listed in :data:`SLOW` (kept here, in one
place, from the durations pytest prints at the end of every run). The fast loop:

    .venv/bin/pytest -m "not slow and not browser and not postgres and not faults and not fuzz"
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent
_BY_DIRECTORY = {"browser": "browser", "postgres": "postgres", "faults": "faults"}

#: Tests (by node id, without parameters) that took 3 s or more on 2 cores in a full run
#: (``--durations``), and those sharing a slow module fixture (the federated experiments).
SLOW: set[str] = {
    "tests/postgres/test_instances.py::test_jobs_run_on_a_worker_are_read_on_any_instance_and_survive_a_killed_worker",
    "tests/postgres/test_instances.py::test_rate_limits_hold_across_instances",
    "tests/postgres/test_instances.py::test_one_answer_per_pair_and_budgets_hold_across_instances",
    "tests/postgres/test_instances.py::test_answers_spread_over_two_instances_under_load_are_stored_exactly_as_acknowledged",
    "tests/api/test_goals.py::test_virtual_respondents_until_goal_met",
    "tests/api/test_goals.py::test_close_when_met_closes_and_thanks",
    "tests/api/test_goals.py::test_survey_goal_plan_uses_the_current_fit",
    "tests/api/test_goals_pairwise.py::test_virtual_respondents_until_the_pairwise_goal_is_met",
    "tests/stats/test_adaptive.py::test_a_respondents_pairs_are_uniform_over_the_pairs_that_touch_its_pool",
    "tests/stats/test_adaptive.py::test_later_pairs_of_a_respondent_still_give_uniform_opponents",
    "tests/api/test_admission.py::test_200_concurrent_requests_from_one_token_are_all_answered",
    "tests/api/test_admission.py::test_forwarded_headers_are_trusted_only_when_configured",
    "tests/api/test_downloads.py::test_stalled_export_readers_do_not_stall_the_api",
    "tests/api/test_full_survey.py::test_complete_survey_ranking_equals_library_and_flips_at_the_rr_rate",
    "tests/api/test_hostile_load_items.py::test_40_concurrent_posts_of_one_pair_store_it_once",
    "tests/api/test_import_sqlite_lock.py::test_respondents_answer_while_a_50000_row_import_runs",
    "tests/api/test_pair_picker.py::test_40_concurrent_pair_requests_keep_memory_flat",
    "tests/api/test_pair_picker.py::test_40_concurrent_pair_requests_on_a_dense_survey_keep_memory_flat",
    "tests/api/test_pair_picker.py::test_concurrent_requests_read_the_counts_once",
    "tests/api/test_plan_bounds.py::test_a_live_plan_stops_when_its_client_leaves_and_never_holds_up_shutdown",
    "tests/api/test_plan_bounds.py::test_a_survey_plan_over_its_budget_stops_with_503",
    "tests/api/test_ranking_surveys.py::test_bad_rankings_are_refused_without_echo",
    "tests/api/test_ranking_surveys.py::test_server_side_privatization_uses_the_respondents_epsilon",
    "tests/api/test_releases.py::test_central_pairs_are_served_without_reading_others_answers",
    "tests/api/test_releases.py::test_releases_spend_the_budget_and_are_stored",
    "tests/api/test_responses.py::test_budget_is_enforced_all_or_nothing",
    "tests/api/test_responses.py::test_idempotency_key_replays_the_first_answer",
    "tests/api/test_survey_plan_api.py::test_plan_from_the_survey_own_fit",
    "tests/api/test_surveys.py::test_close_and_reopen",
    "tests/api/test_uncertainty_api.py::test_plan_command_line",
    "tests/stats/test_adaptive.py::test_adaptive_saves_answers_when_the_top_k_stands_apart_and_costs_nothing_when_all_are_in_doubt",
    "tests/stats/test_adaptive.py::test_false_certification_stays_within_one_minus_level_under_continuous_monitoring",
    "tests/stats/test_central.py::test_continuous_laplace_from_opendp_has_the_stated_scale",
    "tests/stats/test_central.py::test_noisy_wins_minus_true_wins_has_variance_two_scale_squared",
    "tests/stats/test_cluster_coverage.py::test_resampled_ballots_are_covered_with_respondents_as_clusters",
    "tests/stats/test_consensus.py::test_debian_privatized_consensus_approaches_the_non_private_one_as_epsilon_grows",
    "tests/stats/test_consistency.py::test_centre_blow_up_regression_large_unbalanced_design",
    "tests/stats/test_federated.py::test_reference_values_within_monte_carlo_error",
    "tests/stats/test_federated.py::test_s1_identity_centre_borda_and_lehmer_fra_nearly_identical",
    "tests/stats/test_federated.py::test_s2_random_centre_borda_clearly_better",
    "tests/stats/test_federated.py::test_s3_error_falls_with_samples_per_site",
    "tests/stats/test_federated.py::test_s3_error_falls_with_the_number_of_sites",
    "tests/stats/test_federated.py::test_s4_lehmer_mean_is_worse_than_majority",
    "tests/stats/test_inference.py::test_bootstrap_intervals_for_small_samples",
    "tests/stats/test_inference.py::test_sandwich_intervals_cover_at_the_nominal_rate",
    "tests/stats/test_planner.py::test_inverse_problems_bracket_the_target",
    "tests/stats/test_planner.py::test_planner_agrees_with_direct_simulation",
    "tests/stats/test_rankings.py::test_inference_attack_kemeny_error_obeys_the_binomial_bound_and_reference",
    "tests/stats/test_rankings.py::test_kemeny_backtracking_is_uniform_over_optima_not_over_last_items",
    "tests/stats/test_rankings.py::test_kemeny_exact_matches_brute_force_and_counts_optima",
    "tests/stats/test_rankings.py::test_kemeny_picks_uniformly_among_optima",
    "tests/stats/test_scenarios.py::test_scenario_III_ranking_errors_fall_with_L_m_delta_T11",
    "tests/stats/test_scenarios.py::test_scenario_II_dividing_line_by_formula_T10",
    "tests/stats/test_scenarios.py::test_scenario_V_debiased_beats_laplace_and_ties_classic_on_ranking_T12",
    "tests/stats/test_survey_plan.py::test_more_heterogeneity_needs_more_respondents",
    "tests/stats/test_survey_plan.py::test_planner_agrees_with_a_direct_simulation_of_the_survey",
    "tests/stats/test_survey_plan.py::test_search_finds_the_smallest_size_that_reaches_the_target",
    "tests/test_cli_plan.py::test_plan_a_running_survey",
    "tests/test_cli_plan.py::test_plan_from_pilot_scores",
    "tests/test_cli_plan.py::test_plan_survey_errors",
    "tests/test_cli_serve.py::test_an_unreachable_database_is_one_line_naming_database_url",
    "tests/test_cli_serve.py::test_serve_starts_quietly",
    "tests/test_cli_serve.py::test_serve_migrates_generates_an_admin_key_once_and_serves",
    "tests/test_cli_simulate.py::test_simulate_writes_table_and_figure",
    "tests/test_install.py::test_an_installed_copy_serves_and_migrates_from_anywhere",
    "tests/test_log_privacy.py::test_no_answer_token_or_key_reaches_the_logs",
    "tests/test_readme_walkthrough.py::test_readme_python_examples_run_as_written",
    "tests/test_readme_walkthrough.py::test_walkthrough_runs_against_a_live_server",
    "tests/test_site_cli.py::test_site_cli_errors",
    "tests/test_site_cli.py::test_three_sites_contribute_from_three_file_formats",
}


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A reachable Redis (tests.helpers.redis): skipped without one, failed under CI."""
    from tests.helpers.redis import redis_server_url

    return redis_server_url()


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        path = Path(item.path)
        # Doctest items (app/stats/*.py) are collected too: only tests/ has marks by place.
        parts = path.relative_to(_HERE).parts if path.is_relative_to(_HERE) else ()
        if parts and parts[0] in _BY_DIRECTORY:
            item.add_marker(_BY_DIRECTORY[parts[0]])
        if parts and parts[-1] == "test_fuzz.py":
            item.add_marker(pytest.mark.fuzz)
        if item.nodeid.split("[", 1)[0] in SLOW:
            item.add_marker(pytest.mark.slow)
