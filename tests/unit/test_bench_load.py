"""``spark-autoscaler benchmark load``: the tick with many queries, the API under many clients."""

import json

from autoscaler.cli import main
from autoscaler.tools.bench.load import api_under_load, hindsight_price_cost, tick_cost


def test_a_tick_with_more_queries_costs_more_and_every_query_is_decided_for():
    small, large = tick_cost(2, ticks=10, warmup=10), tick_cost(40, ticks=10, warmup=10)
    assert 0 < small["cpu_ms_per_tick_median"] < large["cpu_ms_per_tick_median"]
    assert small["cpu_ms_per_tick_median"] <= small["cpu_ms_per_tick_p95"]


def test_the_hindsight_price_is_computed_over_each_remembered_span():
    # a random burst every 5 minutes changes the need far more often than 20 times a day: a
    # change has a price over one day and over seven (what the CPU figure is the cost of)
    one, seven = hindsight_price_cost((1, 7), repeats=1)
    assert (one["steps"], seven["steps"]) == (288, 2016)
    assert one["price_executor_seconds"] > 0 and seven["price_executor_seconds"] > 0
    assert one["cpu_ms_median"] > 0 and seven["cpu_ms_median"] > 0


def test_the_api_answers_every_concurrent_client_while_the_daemon_ticks():
    result = api_under_load(clients=8, requests_per_client=12, queries=4)
    assert result["requests"] == 96 and result["server_errors"] == 0
    assert set(result["statuses"]) == {"200"}  # reads, and control changes with a valid token
    assert result["ticks_meanwhile"] > 0 and 0 < result["latency_ms_p50"] <= result["latency_ms_p99"]


def test_the_cli_prints_one_json_document(capsys):
    assert main(["benchmark", "load", "--queries", "1,3", "--ticks", "5", "--clients", "3", "--requests-per-client", "4", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [c["queries"] for c in result["tick_cost"]] == [1, 3] and result["api"]["requests"] == 12
    assert [h["days_remembered"] for h in result["hindsight_price"]] == [1, 7]


def test_query_counts_out_of_range_are_refused(capsys):
    assert main(["benchmark", "load", "--queries", "0,5"]) == 2
    assert "each count must be within 1..1000" in capsys.readouterr().err


def test_more_clients_than_threads_we_would_start_are_refused(capsys, monkeypatch):
    # 100,000 clients ran on, a thread each, every refused request printed (2026-12-01)
    def measure(*args, **kwargs):
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr("autoscaler.tools.bench.load.run", measure)
    assert main(["benchmark", "load", "--clients", "100000"]) == 2
    assert "spark-autoscaler: error: --clients: 100000: at most 1000 (each is a thread on this machine)" in capsys.readouterr().err
