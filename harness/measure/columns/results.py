"""results.csv's columns: one row per point (docs/reference/columns.md is generated from these)."""

from __future__ import annotations

from harness.measure.columns.base import (
    BATCH_SEARCH, BYTES, CONTEXT_DECLARED, COUNT, Column, FLOP, GBPS, JOULES_PER_TOKEN, MS,
    PER_POINT, PER_SEQUENCE, POINTS, POINT_DECLARED, PREFIXES, PRICE_PER_M_TOKENS, QUANTIZATION, RATIO, REQUESTS_PER_S,
    ROOFLINE, S, SAMPLING, SHARE, SPECULATIVE, SPECULATIVE_WHERE, STREAMS, STRUCTURED, TEXT, TFLOPS, TOKENS, TOKENS_PER_S,
    UNCERTAINTY, WATTS, ZERO, HEADLINE, REASONING, KWH_PER_M_TOKENS, ci95_family, draft_counters, keyed, stats_family,
)
from harness.measure.columns.base import (
    ACCURACY, CELSIUS, MHZ, PROFILE, TOOLS, VALIDITY,
)
from harness.measure.columns.stream import STREAM_DECLARED
from harness.measure.metrics import REQUEST_STATS

REASONING_WHERE = "streams from servers that stream reasoning apart"


# --- results.csv: one row per point ---------------------------------------------------------------------------

RUN_DECLARED = [
    Column("num_batches", COUNT, "Timed batches (with `num_batches: auto`, how many it took). "
           f"{POINTS}", "batch"),
    Column("num_warmup_batches", COUNT, "Untimed warm-up batches run before them; 0 when the point never ran.",
           "batch"),
    Column("profile_trace", TEXT, "The point's profiler trace (one more batch of its shape, untimed, after the timed "
           "ones), relative to the results folder (`profiles/*.json.gz`, for Perfetto or chrome://tracing); empty "
           f"when not profiled. {PROFILE}", "entries with profile: true"),
    Column("status", TEXT, "`ok`, `oom` (out of memory), `skipped` (not run: an engine limit, a failed memory "
           "check, an unsupported option) or `error`.", "all", words=("ok", "oom", "skipped", "error"), required=True),
    Column("error", TEXT, "Why the point is not `ok`, on one line; empty when it is.", "all"),
    Column("grid_options", TEXT, "The options the entry's `grid` varies and this entry's values of them, "
           "`max_num_seqs=64;enable_chunked_prefill=false` (the label's `[...]`); empty for an entry without a grid "
           "(docs/guides/sweeps.md, \"Grids over engine options\").", "all"),
]

TIMING_DECLARED = (
    # Each value is defined where it is written one by one: samples.csv (per batch) and requests.csv (per request).
    stats_family("latency_ms", MS, "the timed batches' `latency_ms`", "batch", PER_POINT)
    + stats_family("ttft_ms", MS, "`ttft_ms` over the timed batches (batch) or the completed requests (stream)",
                   "all", PER_POINT)
    + stats_family("tpot_ms", MS, "`tpot_ms` over the timed batches (batch) or the completed requests (stream); "
                   "empty when none got past one token", "all", PER_POINT)
    + [
        Column("throughput_tokens_per_s", TOKENS_PER_S, "Output tokens per second: a batch point's total output "
               "tokens / total latency of its timed batches; a stream point's completed requests' output tokens / "
               f"`duration_s`. {PER_POINT}", "all"),
        Column("prefill_tokens_per_s", TOKENS_PER_S, "Total input tokens / total TTFT of the timed batches (padding "
               f"never counted). {PER_POINT}", "batch"),
        Column("latency_per_output_token_ms", MS, "Total latency / total decode steps of the timed batches (each "
               "batch's longest sequence's output tokens): per step of the batch, not per token of its sequences. "
               f"{PER_POINT}", "batch"),
    ]
)

UNCERTAINTY_DECLARED = (
    ci95_family("latency_ms", MS, "the mean latency", "Student's t, n - 1 degrees of freedom")
    + ci95_family("ttft_ms", MS, "the mean TTFT", "Student's t, n - 1 degrees of freedom")
    + ci95_family("tpot_ms", MS, "the mean TPOT", "Student's t, n - 1 degrees of freedom")
    + ci95_family("throughput_tokens_per_s", TOKENS_PER_S, "the throughput", "the ratio estimator's, throughput "
                  "being a ratio of totals")
    + [
        Column("latency_ms_cv", RATIO, "Coefficient of variation of the batch latencies: sample standard deviation "
               f"/ mean. {UNCERTAINTY}", "batch"),
        Column("converged", "true/false", "`true` when the mean latency's 95% interval got within "
               "`stop.target_ci_pct` of the mean, `false` when timing stopped at `stop.max_batches`. "
               f"{UNCERTAINTY}", "num_batches: auto"),
    ]
)

TOKENS_DECLARED = [
    Column("input_tokens_mean", TOKENS, "Mean real prompt tokens per sequence (per completed request in a stream), "
           f"padding excluded, a shared prefix included. {PER_POINT}", "all"),
    Column("input_tokens_max", TOKENS, f"The longest of those prompts. {PER_POINT}", "all"),
    Column("output_tokens_mean", TOKENS, f"Mean output tokens per sequence or completed request. {PER_POINT}",
           "all"),
    Column("output_tokens_source", TEXT, "Where the requests' output counts come from: `engine` (its token ids), "
           "`usage` (the server's final usage), `tokenizer` (the text re-tokenized), `chunks` (one per streamed "
           f"chunk) or `none` (embeddings, rerank); joined with `+` when requests differ. {STREAMS}", "stream"),
    Column("invalid_answer_share", SHARE, "Completed timed requests whose answer did not parse as JSON or meet "
           "`workload.json_schema`, or did not call a tool of `workload.tools` as its parameters take / completed "
           f"timed requests. {STRUCTURED} {TOOLS}", "streams with workload.json_schema or workload.tools"),
    Column("reasoning_tokens_mean", TOKENS, "Mean of `reasoning_tokens` over the completed requests that streamed "
           f"reasoning apart from the answer (part of `output_tokens_mean`). {REASONING}", REASONING_WHERE),
    *stats_family("ttft_answer_ms", MS, "`ttft_answer_ms` (the answer's first token, after the reasoning) over the "
                  "completed requests", REASONING_WHERE, REASONING, REQUEST_STATS),
    Column("prefix_cache_hit_rate", SHARE, "Prompt tokens served from the prefix cache / prompt tokens, over the "
           "timed sequences or requests where the engine reports every one's cached tokens; else a stream's "
           f"`server_prefix_cache_hit_rate`. {PREFIXES}", "vllm; openai streams"),
]

# Per sequence of a static batch (metrics.REQUEST_METRICS), pooled over every sequence of every timed batch.
REQUEST_WORDS = {
    "request_ttft_ms": "per-sequence TTFT (its batch's submission to its own first token)",
    "request_tpot_ms": "per-sequence TPOT ((its last token - its first) / (its tokens - 1))",
    "request_latency_ms": "per-sequence latency (its batch's submission to its own last token)",
}
REQUEST_DECLARED = [c for metric, of in REQUEST_WORDS.items()
                    for c in stats_family(metric, MS, of + " over every timed sequence", "batch", PER_SEQUENCE,
                                          REQUEST_STATS)]

MEMORY_DECLARED = [
    Column("peak_memory_bytes", BYTES, "Peak memory during the point: the device allocator's peak on a GPU, the "
           f"process tree's peak RSS on a CPU (reset before each point). {PER_POINT}", "points that ran"),
    Column("peak_host_memory_bytes", BYTES, "Host peak RSS beside the device's, for an engine that keeps its "
           f"weights on the host. {ZERO}", "deepspeed_zero"),
    Column("memory_before_load_bytes", BYTES, "The `peak_memory_bytes` counter read before the engine loaded; the "
           f"peak minus it is what the engine and the point added. {PER_POINT}", "measured points"),
    Column("estimated_memory_bytes", BYTES, "The planner's memory estimate for the point; empty on a "
           f"`batch_sizes: auto` search's result row. {PER_POINT}", "all"),
    Column("load_time_s", S, "Building or loading the model and starting the engine, imports excluded; the entry's, "
           f"on each of its rows. {PER_POINT}", "all"),
]

SEARCH_DECLARED = [
    Column("search", TEXT, "`probe` on each batch size or rate a search tried, `result` on the search's own row. "
           f"{BATCH_SEARCH}", "batch_sizes: auto; request_rates: auto", words=("probe", "result")),
    Column("search_probes", TEXT, "Every probe in order with how it went (`64 ok, 128 oom`; `4/s met, 8/s missed`), "
           f"and why the search stopped short where it did. {BATCH_SEARCH}", "search result rows"),
    Column("max_rate_within_slo", REQUESTS_PER_S, "The highest rate probed whose `slo_attainment` reached "
           f"`slo_percentile`; empty when none did. {STREAMS}", "request_rates: auto"),
    Column("max_batch_size_found", COUNT, "The largest batch size that ran; empty when none did. "
           f"{BATCH_SEARCH}", "batch_sizes: auto"),
    Column("max_batch", "true/blank", "`true` on the probe row of the largest batch that ran. "
           f"{BATCH_SEARCH}", "batch_sizes: auto"),
]

ENGINE_DECLARED = [
    Column("kv_cache_capacity_tokens", TOKENS, "Tokens vLLM's KV cache holds: its blocks x block size.", "vllm"),
    Column("engine_kv_cache_bytes", BYTES, "`kv_cache_capacity_tokens` x the KV bytes per token the harness computes "
           "from the model's config at the model's dtype (not read from vLLM).", "vllm"),
    Column("batching", TEXT, "How the stream is batched: `continuous` (vllm; hf with `batching: continuous`), "
           "`static` (hf with `batching: static`) or `server` (openai: the server's own).", "vllm, hf, openai streams"),
    Column("prefix_caching", "True/False", "Whether the engine reuses prompt KV across requests: vLLM's "
           "`enable_prefix_caching`; `False` for hf; for openai what the server's command says, else empty. "
           f"{PREFIXES}", "vllm; hf and openai streams"),
]

SERVER_DECLARED = [
    Column("server_requests_running_max", COUNT, "Largest scraped value of the server's running-requests gauge (a "
           f"peak between two scrapes is missed). {STREAMS}", "openai entries with server metrics"),
    Column("server_requests_waiting_max", COUNT, f"Largest scraped value of its waiting-requests gauge. {STREAMS}",
           "openai entries with server metrics"),
    Column("server_kv_cache_usage_max", SHARE, "Largest scraped KV-cache usage, as a fraction of the cache. "
           f"{STREAMS}", "vLLM, SGLang servers"),
    Column("server_preemptions", COUNT, "Increase of the server's preemption counter from the first scrape to the "
           f"last. {STREAMS}", "vLLM servers"),
    Column("server_prefix_cache_hit_rate", SHARE, "Increase of the server's prefix-cache hits / increase of its "
           f"queries (both in tokens) over the stream. {STREAMS}", "vLLM servers"),
    Column("server_metrics_file", TEXT, "The point's scraped time series, relative to the results folder "
           f"(`server_metrics/*.csv`). {STREAMS}", "openai entries with server metrics"),
]


SPEC_DECLARED = (
    [
        Column("spec_method", TEXT, "The entry's `speculative.method` (`ngram`, `prompt_lookup`, `draft`, `eagle`); "
               f"empty without speculation. {SPECULATIVE}", SPECULATIVE_WHERE),
        Column("spec_tokens", TOKENS, "k: tokens the draft proposes per step (`num_speculative_tokens`). "
               f"{SPECULATIVE}", SPECULATIVE_WHERE),
    ]
    + draft_counters("summed over the timed batches or the timed stream")
    + [
        Column("acceptance_rate", SHARE, f"`draft_tokens_accepted` / `draft_tokens_proposed`. {SPECULATIVE}",
               SPECULATIVE_WHERE),
        Column("mean_accepted_length", TOKENS, "1 + accepted / draft steps: tokens a verifying pass emits, the "
               f"target's own token included. {SPECULATIVE}", SPECULATIVE_WHERE),
        Column("spec_baseline", TEXT, "The entry without speculation (same engine and options) this one is compared "
               f"with. {SPECULATIVE}", SPECULATIVE_WHERE),
        Column("speedup_vs_baseline", RATIO, "The baseline's `tpot_ms_mean` at the same point / this entry's. "
               f"{SPECULATIVE}", SPECULATIVE_WHERE),
    ]
)

CROSSCHECK_DECLARED = [
    Column("tokens_identical_share", SHARE, "Share of generated token positions identical to the reference entry's "
           "at the same point (a speculative entry's `spec_baseline`, else the sweep's first entry without "
           "speculation), each sequence up to its first EOS; over the first timed batch, or every timed request. "
           f"Empty when sampling or when the weights differ. {SAMPLING}",
           "greedy entries with a same-weights reference"),
]

QUALITY_DECLARED = [
    Column("quantization", TEXT, f"The entry's weights as loaded: `none`, `int8`, `int4` or `fp8`. {QUANTIZATION}",
           "all"),
    Column("weight_bytes", BYTES, "Bytes the model's parameters and buffers hold as loaded (a quantized weight's "
           "data, scales and zero points; tied weights once); deepspeed_zero: the whole model as partitioned. "
           f"{QUANTIZATION}", "hf, accelerate, deepspeed, deepspeed_zero"),
    Column("quality_reference", TEXT, "The unquantized entry (same engine and options) a quantized entry is held "
           f"against. {QUANTIZATION}", "quantized entries"),
    Column("logits_rel_error", RATIO, "||L_q - L||_2 / ||L||_2 of the last prompt position's logits against "
           "`quality_reference`'s, on the point's first inputs (untimed); 0 on the reference's own rows. "
           f"{QUANTIZATION}", "sweeps that quantize"),
    Column("top1_agreement", SHARE, "Share of prompt positions whose argmax agrees with `quality_reference`'s; 1 on "
           f"the reference's own rows. {QUANTIZATION}", "sweeps that quantize"),
    Column("perplexity", "dimensionless", "exp(mean negative log-likelihood) of the model on `quality.text`, in "
           f"non-overlapping windows; once per entry, untimed. {QUANTIZATION}", "quality.text set"),
    Column("perplexity_delta", "dimensionless", "This entry's `perplexity` minus its `quality_reference`'s; 0 on the "
           f"reference's own rows. {QUANTIZATION}", "quality.text set, sweeps that quantize", signed=True),
    Column("accuracy", SHARE, "Share of `accuracy.tasks`' examples (all tasks together) the entry's own engine "
           f"answered exactly, greedily, once after loading; the manifest has each task's. {ACCURACY}",
           "accuracy.tasks set"),
    Column("accuracy_ci95_low", SHARE, f"Low end of `accuracy`'s 95% Wilson interval. {ACCURACY}",
           "accuracy.tasks set"),
    Column("accuracy_ci95_high", SHARE, f"High end of `accuracy`'s 95% Wilson interval. {ACCURACY}",
           "accuracy.tasks set"),
    Column("accuracy_examples", COUNT, f"Examples `accuracy` is the share of. {ACCURACY}", "accuracy.tasks set"),
    Column("accuracy_delta", SHARE, "This entry's `accuracy` minus its reference's: `quality_reference` for a "
           "quantized entry, `spec_baseline` for a speculative one; 0 on a reference's own rows. "
           f"{ACCURACY}", "accuracy.tasks set, sweeps that quantize or speculate", signed=True),
    Column("accuracy_delta_ci95_low", SHARE, "Low end of `accuracy_delta`'s 95% interval (Newcombe's, for two "
           f"proportions); above 0 or `accuracy_delta_ci95_high` below it: a real difference. {ACCURACY}",
           "accuracy.tasks set, quantized and speculative entries", signed=True),
    Column("accuracy_delta_ci95_high", SHARE, f"High end of `accuracy_delta`'s 95% interval. {ACCURACY}",
           "accuracy.tasks set, quantized and speculative entries", signed=True),
]

ROOFLINE_WHERE = "batch, no speculation, known peaks"
ROOFLINE_DECLARED = [
    Column("peak_memory_bandwidth_gbps", GBPS, "Peak memory bandwidth the point is held against: one device's "
           "(datasheet for a GPU, measured for a CPU, or `hardware.peak_memory_bandwidth_gbps`) x the entry's GPUs. "
           f"{ROOFLINE}", ROOFLINE_WHERE),
    Column("peak_tflops", TFLOPS, "Peak dense FLOP/s in the dtype, likewise (`hardware.peak_tflops` overrides). "
           f"{ROOFLINE}", ROOFLINE_WHERE),
    Column("decode_bytes_per_step", BYTES, "Bytes one decode step reads, from the model's config: weights read + "
           f"batch x context x KV bytes per token, context = mean prompt + half the mean output. {ROOFLINE}",
           ROOFLINE_WHERE),
    Column("decode_flops_per_step", FLOP, "FLOPs of that decode step (2 per multiply-add, attention over the "
           f"context included). {ROOFLINE}", ROOFLINE_WHERE),
    Column("decode_bandwidth_gbps", GBPS, f"`decode_bytes_per_step` / mean TPOT. {ROOFLINE}", ROOFLINE_WHERE),
    Column("mbu", SHARE, f"Memory bandwidth utilization: `decode_bandwidth_gbps` / peak bandwidth. {ROOFLINE}",
           ROOFLINE_WHERE, beyond_one=True),
    Column("prefill_bytes", BYTES, "Bytes a batch's prefill moves: weights read + prompt tokens x KV bytes per "
           f"token; the mean over the timed batches. {ROOFLINE}", ROOFLINE_WHERE),
    Column("prefill_flops", FLOP, "FLOPs of a batch's prefill: body matmuls per prompt token, the head per "
           f"sequence, causal attention; the mean over the timed batches. {ROOFLINE}", ROOFLINE_WHERE),
    Column("prefill_tflops", TFLOPS, f"`prefill_flops` / mean TTFT. {ROOFLINE}", ROOFLINE_WHERE),
    Column("mfu", SHARE, f"Model FLOP/s utilization: `prefill_tflops` / `peak_tflops`. {ROOFLINE}", ROOFLINE_WHERE, beyond_one=True),
    Column("roofline_latency_ms", MS, "Lower bound on a batch's latency from the two peaks: the prefill and each "
           f"decode step at the slower of bytes / bandwidth and FLOPs / FLOP/s. {ROOFLINE}", ROOFLINE_WHERE),
    Column("roofline_ratio", RATIO, "`latency_ms_mean` / `roofline_latency_ms`; below 1 a peak or a formula is "
           f"wrong. {ROOFLINE}", ROOFLINE_WHERE),
    Column("cost_per_million_output_tokens", PRICE_PER_M_TOKENS, "`hardware.cost_per_hour` x the entry's devices / "
           "output tokens per hour (from `throughput_tokens_per_s`) x 10^6, in the currency of `cost_per_hour`. "
           f"{ROOFLINE}", "hardware.cost_per_hour set"),
]

ENERGY_WHERE = "batch, GPU (NVML)"
ENERGY_DECLARED = [
    Column("energy_j_per_output_token", JOULES_PER_TOKEN, "NVML energy of every GPU of the entry over the timed "
           f"batches / their output tokens; never estimated. {ROOFLINE}", ENERGY_WHERE),
    Column("avg_power_w", WATTS, f"That energy / the timed batches' summed latency. {ROOFLINE}", ENERGY_WHERE),
    Column("energy_kwh_per_million_output_tokens", KWH_PER_M_TOKENS, "`energy_j_per_output_token` x 10^6 / "
           f"3.6 x 10^6: the same energy per million output tokens, beside `cost_per_million_output_tokens`. "
           f"{ROOFLINE}", ENERGY_WHERE),
]

VALIDITY_WHERE = "GPU (NVML)"
VALIDITY_DECLARED = [
    Column("validity", TEXT, "`valid`, `suspect` (the SM clock more than 10% below its median at a reading NVML "
           "gave no reason for) or `invalid` (a hardware or thermal slowdown, another process on the GPU, an uncorrected ECC "
           f"error or an XID event while the point was timed); empty without NVML. {VALIDITY}", VALIDITY_WHERE,
           words=("valid", "suspect", "invalid")),
    Column("validity_reason", TEXT, f"What made the point `suspect` or `invalid`, as NVML reported it. {VALIDITY}",
           VALIDITY_WHERE),
    Column("gpu_sm_clock_min_mhz", MHZ, "The lowest SM clock read while the point was timed (the slowest of the "
           f"entry's GPUs at each reading, ten readings a second). {VALIDITY}", VALIDITY_WHERE),
    Column("gpu_sm_clock_median_mhz", MHZ, f"The median of those readings. {VALIDITY}", VALIDITY_WHERE),
    Column("gpu_slowdown_share", SHARE, "Share of the readings with a hardware, thermal or power-brake slowdown on "
           f"any of the entry's GPUs. {VALIDITY}", VALIDITY_WHERE),
    Column("gpu_power_capped_share", SHARE, "Share of the readings with a GPU held at its power limit: how the card "
           f"runs under heavy load, not a fault. {VALIDITY}", VALIDITY_WHERE),
    Column("gpu_temperature_max_c", CELSIUS, f"The hottest reading of any of the entry's GPUs. {VALIDITY}",
           VALIDITY_WHERE),
    Column("gpu_other_memory_bytes", BYTES, "The most GPU memory other processes held at one reading, where NVML "
           f"can say (a process seen with none it can say makes the point invalid too). {VALIDITY}", VALIDITY_WHERE),
]

# The field's headline view: throughput per GPU against the speed each user sees (plots' headline chart).
HEADLINE_DECLARED = [
    Column("output_tokens_per_s_per_gpu", TOKENS_PER_S, "`throughput_tokens_per_s` / `num_devices` (the entry's "
           f"devices on every node; 1 for a CPU entry). {HEADLINE}", "all"),
    Column("output_tokens_per_s_per_user", TOKENS_PER_S, "Output tokens per second one user sees once the answer "
           "has started: a batch point's 1000 / `tpot_ms_mean` (a sequence gets a token per decode step); a stream "
           "point's median over completed requests of (output tokens - 1) / (last token - first token). "
           f"{HEADLINE}", "all"),
]

RESULTS = keyed(
    CONTEXT_DECLARED + POINT_DECLARED  # results.csv holds both scenarios' rows
    + RUN_DECLARED + TIMING_DECLARED + UNCERTAINTY_DECLARED + TOKENS_DECLARED + REQUEST_DECLARED + MEMORY_DECLARED
    + STREAM_DECLARED + SEARCH_DECLARED + ENGINE_DECLARED + SERVER_DECLARED + SPEC_DECLARED + CROSSCHECK_DECLARED
    + QUALITY_DECLARED + ROOFLINE_DECLARED + ENERGY_DECLARED + VALIDITY_DECLARED + HEADLINE_DECLARED
)

# The columns an engine's own figures fill (Backend.engine_stats); its other figures go to the manifest only.
ENGINE_STAT_COLUMNS = tuple(c.name for c in ENGINE_DECLARED) + ("weight_bytes",)
