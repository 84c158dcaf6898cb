"""A server's Prometheus text read into the harness's series, and a stream's series into its columns. The scrape
of a real `vllm serve` is in tests/test_openai_server.py, the columns, files and chart through benchmark.py in
tests/test_stream_e2e.py."""

import pytest

from backends.openai_compat.server_metrics import parse, series_values
from harness.measure.metrics import server_figures
from harness.scenarios.stream import ServerSeries

VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
vllm:num_requests_running{engine="1",model_name="tiny"} 2.0
vllm:num_requests_waiting{engine="0",model_name="tiny"} 4.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny",reason="capacity"} 99.0
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
vllm:num_preemptions_total{engine="0",model_name="tiny"} 7.0
vllm:prefix_cache_queries_total{engine="0",model_name="tiny"} 1000.0
vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 250.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="tiny"} 1.0
"""


def test_vllm_text_summed_over_engines_and_longer_names_left_alone():
    values = series_values(parse(VLLM_TEXT))
    assert values == {"requests_running": 5.0, "requests_waiting": 4.0, "kv_cache_usage": 0.25, "preemptions": 7.0,
                      "prefix_cache_hits": 250.0, "prefix_cache_queries": 1000.0}


def test_other_servers_names_and_missing_ones():
    sglang = ('sglang:num_running_reqs{model_name="m"} 6\nsglang:num_queue_reqs{model_name="m"} 1\n'
              'sglang:token_usage 0.5\n')
    assert series_values(parse(sglang)) == {"requests_running": 6.0, "requests_waiting": 1.0, "kv_cache_usage": 0.5,
                                            "preemptions": None, "prefix_cache_hits": None,
                                            "prefix_cache_queries": None}
    assert parse("tgi_queue_size 2\nnot_a_metric 1\n# comment\n") == {"tgi_queue_size": 2.0}


def test_figures_are_gauge_peaks_and_counter_increases():
    series = ServerSeries((-0.1, 0.5, 1.0, 1.6), {
        "requests_running": (0.0, 4.0, 6.0, 0.0), "requests_waiting": (0.0, 2.0, None, 0.0),
        "kv_cache_usage": (0.0, 0.3, 0.45, 0.0), "preemptions": (7.0, 7.0, 9.0, 10.0),
        "prefix_cache_hits": (250.0, 260.0, 270.0, 280.0), "prefix_cache_queries": (1000.0, 1040.0, 1080.0, 1120.0),
    })
    assert server_figures(series) == {
        "server_requests_running_max": 6.0, "server_requests_waiting_max": 2.0, "server_kv_cache_usage_max": 0.45,
        "server_preemptions": 3.0, "server_prefix_cache_hit_rate": pytest.approx(0.25)}
    unknown = ServerSeries((0.0, 1.0), {name: (None, None) for name in series.values})
    assert set(server_figures(unknown).values()) == {None}
    assert server_figures(None) == {}
