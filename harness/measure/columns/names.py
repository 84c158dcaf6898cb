"""Every declared column's name as an attribute whose value is that name, for code that reads the CSV files (the
plots) to import rather than spell: `R.ttft_ms_p50`, `Q.send_slip_ms`. A mistyped name is an AttributeError, which
mypy and an editor see before any run.

One namespace per file:

- `R`: results.csv (RESULTS)
- `S`: samples.csv (SAMPLES)
- `Q`: requests.csv (REQUESTS)
- `M`: server_metrics/*.csv (SERVER_METRICS)
- `A`: accuracy.csv (ACCURACY_TASKS)
- `Leading`: the context and point columns every file but the server metrics begins with (base.leading); `R`, `S`
  and `Q` inherit them, so `Q.backend` is requests.csv's `backend`.

Written by hand, not generated: tests/test_columns.py holds each namespace to its file's declarations in both
directions and prints the lines to add or remove when they part. Every declared name is a fixed identifier (no family
takes its key at run time), so an attribute each is enough.
"""


class Leading:
    # context: which entry
    benchmark_name = "benchmark_name"
    backend = "backend"
    model = "model"
    dtype = "dtype"
    hardware = "hardware"
    num_devices = "num_devices"
    tp_size = "tp_size"
    pp_size = "pp_size"
    nodes = "nodes"
    # point: which load
    scenario = "scenario"
    workload = "workload"
    batch_size = "batch_size"
    input_length = "input_length"
    output_length = "output_length"
    request_rate = "request_rate"
    max_concurrency = "max_concurrency"


class R(Leading):
    # run
    num_batches = "num_batches"
    num_warmup_batches = "num_warmup_batches"
    profile_trace = "profile_trace"
    status = "status"
    error = "error"
    grid_options = "grid_options"
    # timing
    latency_ms_mean = "latency_ms_mean"
    latency_ms_p50 = "latency_ms_p50"
    latency_ms_p90 = "latency_ms_p90"
    latency_ms_p99 = "latency_ms_p99"
    latency_ms_std = "latency_ms_std"
    ttft_ms_mean = "ttft_ms_mean"
    ttft_ms_p50 = "ttft_ms_p50"
    ttft_ms_p90 = "ttft_ms_p90"
    ttft_ms_p99 = "ttft_ms_p99"
    ttft_ms_std = "ttft_ms_std"
    tpot_ms_mean = "tpot_ms_mean"
    tpot_ms_p50 = "tpot_ms_p50"
    tpot_ms_p90 = "tpot_ms_p90"
    tpot_ms_p99 = "tpot_ms_p99"
    tpot_ms_std = "tpot_ms_std"
    throughput_tokens_per_s = "throughput_tokens_per_s"
    prefill_tokens_per_s = "prefill_tokens_per_s"
    latency_per_output_token_ms = "latency_per_output_token_ms"
    # uncertainty
    latency_ms_ci95_low = "latency_ms_ci95_low"
    latency_ms_ci95_high = "latency_ms_ci95_high"
    ttft_ms_ci95_low = "ttft_ms_ci95_low"
    ttft_ms_ci95_high = "ttft_ms_ci95_high"
    tpot_ms_ci95_low = "tpot_ms_ci95_low"
    tpot_ms_ci95_high = "tpot_ms_ci95_high"
    throughput_tokens_per_s_ci95_low = "throughput_tokens_per_s_ci95_low"
    throughput_tokens_per_s_ci95_high = "throughput_tokens_per_s_ci95_high"
    latency_ms_cv = "latency_ms_cv"
    converged = "converged"
    # tokens
    input_tokens_mean = "input_tokens_mean"
    input_tokens_max = "input_tokens_max"
    output_tokens_mean = "output_tokens_mean"
    output_tokens_source = "output_tokens_source"
    prefix_cache_hit_rate = "prefix_cache_hit_rate"
    invalid_answer_share = "invalid_answer_share"
    # per sequence of a static batch
    request_ttft_ms_mean = "request_ttft_ms_mean"
    request_ttft_ms_p50 = "request_ttft_ms_p50"
    request_ttft_ms_p90 = "request_ttft_ms_p90"
    request_ttft_ms_p99 = "request_ttft_ms_p99"
    request_tpot_ms_mean = "request_tpot_ms_mean"
    request_tpot_ms_p50 = "request_tpot_ms_p50"
    request_tpot_ms_p90 = "request_tpot_ms_p90"
    request_tpot_ms_p99 = "request_tpot_ms_p99"
    request_latency_ms_mean = "request_latency_ms_mean"
    request_latency_ms_p50 = "request_latency_ms_p50"
    request_latency_ms_p90 = "request_latency_ms_p90"
    request_latency_ms_p99 = "request_latency_ms_p99"
    # memory
    peak_memory_bytes = "peak_memory_bytes"
    peak_host_memory_bytes = "peak_host_memory_bytes"
    memory_before_load_bytes = "memory_before_load_bytes"
    estimated_memory_bytes = "estimated_memory_bytes"
    load_time_s = "load_time_s"
    # stream
    num_requests = "num_requests"
    num_warmup_requests = "num_warmup_requests"
    requests_failed = "requests_failed"
    achieved_request_rate = "achieved_request_rate"
    duration_s = "duration_s"
    num_conversations = "num_conversations"
    itl_ms_mean = "itl_ms_mean"
    itl_ms_p50 = "itl_ms_p50"
    itl_ms_p90 = "itl_ms_p90"
    itl_ms_p99 = "itl_ms_p99"
    itl_ms_std = "itl_ms_std"
    e2e_ms_mean = "e2e_ms_mean"
    e2e_ms_p50 = "e2e_ms_p50"
    e2e_ms_p90 = "e2e_ms_p90"
    e2e_ms_p99 = "e2e_ms_p99"
    e2e_ms_std = "e2e_ms_std"
    slo_ttft_ms = "slo_ttft_ms"
    slo_tpot_ms = "slo_tpot_ms"
    slo_percentile = "slo_percentile"
    slo_attainment = "slo_attainment"
    goodput = "goodput"
    max_concurrency_reached = "max_concurrency_reached"
    send_slip_ms_p50 = "send_slip_ms_p50"
    send_slip_ms_p99 = "send_slip_ms_p99"
    queue_ms_mean = "queue_ms_mean"
    saturated = "saturated"
    saturation_reason = "saturation_reason"
    # searches
    search = "search"
    search_probes = "search_probes"
    max_rate_within_slo = "max_rate_within_slo"
    max_batch_size_found = "max_batch_size_found"
    max_batch = "max_batch"
    # engine
    kv_cache_capacity_tokens = "kv_cache_capacity_tokens"
    engine_kv_cache_bytes = "engine_kv_cache_bytes"
    batching = "batching"
    prefix_caching = "prefix_caching"
    # server
    server_requests_running_max = "server_requests_running_max"
    server_requests_waiting_max = "server_requests_waiting_max"
    server_kv_cache_usage_max = "server_kv_cache_usage_max"
    server_preemptions = "server_preemptions"
    server_prefix_cache_hit_rate = "server_prefix_cache_hit_rate"
    server_metrics_file = "server_metrics_file"
    # speculative decoding
    spec_method = "spec_method"
    spec_tokens = "spec_tokens"
    draft_steps = "draft_steps"
    draft_tokens_proposed = "draft_tokens_proposed"
    draft_tokens_accepted = "draft_tokens_accepted"
    acceptance_rate = "acceptance_rate"
    mean_accepted_length = "mean_accepted_length"
    spec_baseline = "spec_baseline"
    speedup_vs_baseline = "speedup_vs_baseline"
    # token cross-check
    tokens_identical_share = "tokens_identical_share"
    # quantization and quality
    quantization = "quantization"
    weight_bytes = "weight_bytes"
    quality_reference = "quality_reference"
    logits_rel_error = "logits_rel_error"
    top1_agreement = "top1_agreement"
    perplexity = "perplexity"
    perplexity_delta = "perplexity_delta"
    accuracy = "accuracy"
    accuracy_ci95_low = "accuracy_ci95_low"
    accuracy_ci95_high = "accuracy_ci95_high"
    accuracy_examples = "accuracy_examples"
    accuracy_delta = "accuracy_delta"
    accuracy_delta_ci95_low = "accuracy_delta_ci95_low"
    accuracy_delta_ci95_high = "accuracy_delta_ci95_high"
    # roofline and cost
    peak_memory_bandwidth_gbps = "peak_memory_bandwidth_gbps"
    peak_tflops = "peak_tflops"
    decode_bytes_per_step = "decode_bytes_per_step"
    decode_flops_per_step = "decode_flops_per_step"
    decode_bandwidth_gbps = "decode_bandwidth_gbps"
    mbu = "mbu"
    prefill_bytes = "prefill_bytes"
    prefill_flops = "prefill_flops"
    prefill_tflops = "prefill_tflops"
    mfu = "mfu"
    roofline_latency_ms = "roofline_latency_ms"
    roofline_ratio = "roofline_ratio"
    cost_per_million_output_tokens = "cost_per_million_output_tokens"
    # energy
    energy_j_per_output_token = "energy_j_per_output_token"
    avg_power_w = "avg_power_w"
    energy_kwh_per_million_output_tokens = "energy_kwh_per_million_output_tokens"
    # GPU validity
    validity = "validity"
    validity_reason = "validity_reason"
    gpu_sm_clock_min_mhz = "gpu_sm_clock_min_mhz"
    gpu_sm_clock_median_mhz = "gpu_sm_clock_median_mhz"
    gpu_slowdown_share = "gpu_slowdown_share"
    gpu_power_capped_share = "gpu_power_capped_share"
    gpu_temperature_max_c = "gpu_temperature_max_c"
    gpu_other_memory_bytes = "gpu_other_memory_bytes"
    # headline: per GPU against per user
    output_tokens_per_s_per_gpu = "output_tokens_per_s_per_gpu"
    output_tokens_per_s_per_user = "output_tokens_per_s_per_user"


class S(Leading):
    batch_index = "batch_index"
    latency_ms = "latency_ms"
    ttft_ms = "ttft_ms"
    tpot_ms = "tpot_ms"
    input_tokens = "input_tokens"
    output_tokens = "output_tokens"
    min_output_tokens = "min_output_tokens"
    draft_steps = "draft_steps"
    draft_tokens_proposed = "draft_tokens_proposed"
    draft_tokens_accepted = "draft_tokens_accepted"
    energy_j = "energy_j"


class Q(Leading):
    request_index = "request_index"
    scheduled_s = "scheduled_s"
    dispatched_s = "dispatched_s"
    sent_s = "sent_s"
    first_token_s = "first_token_s"
    last_token_s = "last_token_s"
    input_tokens = "input_tokens"
    cached_tokens = "cached_tokens"
    output_tokens = "output_tokens"
    output_tokens_source = "output_tokens_source"
    ttft_ms = "ttft_ms"
    tpot_ms = "tpot_ms"
    e2e_ms = "e2e_ms"
    itl_ms_mean = "itl_ms_mean"
    itl_ms_max = "itl_ms_max"
    send_slip_ms = "send_slip_ms"
    client_wait_ms = "client_wait_ms"
    queue_ms = "queue_ms"
    met_slo = "met_slo"
    error = "error"
    conversation = "conversation"
    turn = "turn"
    context_tokens = "context_tokens"
    answer_valid = "answer_valid"


class A:
    backend = "backend"
    task = "task"
    metric = "metric"
    examples = "examples"
    correct = "correct"
    value = "value"
    ci95_low = "ci95_low"
    ci95_high = "ci95_high"
    stderr = "stderr"
    evaluated = "evaluated"


class M:
    t_s = "t_s"
    requests_running = "requests_running"
    requests_waiting = "requests_waiting"
    kv_cache_usage = "kv_cache_usage"
    preemptions = "preemptions"
    prefix_cache_hits = "prefix_cache_hits"
    prefix_cache_queries = "prefix_cache_queries"
