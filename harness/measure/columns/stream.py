"""results.csv's stream columns: what a stream point's requests did together (docs/reference/columns.md is generated
from these, in results.py's order)."""

from __future__ import annotations

from harness.measure.columns.base import (
    COUNT, Column, IMAGES, IMAGES_WHERE, INPUTS_PER_S, LORA, MS, MULTI_TURN, PERCENT, PIXELS, POOLING, REQUESTS_PER_S,
    S, SHARE, STREAMS, TEXT, TOKENS_PER_S, stats_family,
)

POOLING_WHERE = "openai entries with endpoint embeddings or rerank"

STREAM_DECLARED = (
    [
        Column("num_requests", COUNT, "Timed requests sent, failed ones included (every turn, multi-turn); with "
               f"`stream.duration_s`, those due within it. {STREAMS}", "stream"),
        Column("num_warmup_requests", COUNT, "Untimed warm-up requests run before the timed stream; 0 when the "
               f"point never ran. {STREAMS}", "stream"),
        Column("requests_failed", COUNT, "Timed requests that failed (error, timeout, wrong token count): in "
               f"requests.csv, left out of every latency, rate and throughput. {STREAMS}", "stream"),
        Column("achieved_request_rate", REQUESTS_PER_S, f"Completed requests / `duration_s`. {STREAMS}", "stream"),
        Column("input_tokens_per_s", TOKENS_PER_S, "Input tokens of the completed requests (as the engine or server "
               "counted them) / `duration_s`: the prompt tokens taken in per second, what an embeddings or rerank "
               f"server is measured by. {STREAMS}", "stream"),
        Column("inputs_per_s", INPUTS_PER_S, "Inputs (embeddings) or documents (rerank) of the completed requests / "
               f"`duration_s`. {POOLING}", POOLING_WHERE),
        Column("lora_adapters", COUNT, "Distinct LoRA adapters the completed requests named (the entry's "
               f"`lora.adapters`, where the stream drew each). {LORA}", "entries with a lora section"),
        Column("inputs_per_request", COUNT, "Mean inputs (documents, for rerank) per completed request: the entry's "
               f"`inputs_per_request`. {POOLING}", POOLING_WHERE),
        Column("images_per_request", COUNT, "Mean images per completed request: the entry's `images.count`. "
               f"{IMAGES}", IMAGES_WHERE),
        Column("image_pixels_mean", PIXELS, "Mean pixels (width x height) of the images the completed requests "
               f"carried; `input_tokens_mean` is their prompts as the server counted them, image tokens included. "
               f"{IMAGES}", IMAGES_WHERE),
        Column("duration_s", S, "From the stream's start (the first request's scheduled arrival) to its last token. "
               f"{STREAMS}", "stream"),
        Column("num_conversations", COUNT, f"Conversations in the stream. {MULTI_TURN}", "multi-turn streams"),
    ]
    + stats_family("itl_ms", MS, "the inter-token gaps of every completed request, pooled (one gap per token "
                   "hand-over after the first)", "stream", STREAMS)
    + stats_family("e2e_ms", MS, "the completed requests' `e2e_ms` (scheduled arrival to last token)", "stream",
                   STREAMS)
    + [
        Column("slo_ttft_ms", MS, f"The TTFT target requests are judged by (`stream.slo.ttft_ms`). {STREAMS}",
               "stream"),
        Column("slo_tpot_ms", MS, f"The TPOT target (`stream.slo.tpot_ms`). {STREAMS}", "stream"),
        Column("slo_percentile", PERCENT, "Percent of requests that must meet both targets for the rate to count as "
               f"sustained (`stream.slo.percentile`, 0-100). {STREAMS}", "stream"),
        Column("slo_attainment", SHARE, "Share of the timed requests that met both targets (a failed request met "
               f"none). {STREAMS}", "stream"),
        Column("goodput", REQUESTS_PER_S, f"Requests that met both targets / `duration_s`. {STREAMS}", "stream"),
        Column("max_concurrency_reached", COUNT, "Most requests between reaching the engine and their last token "
               f"at any instant. {STREAMS}", "stream"),
        Column("send_slip_ms_p50", MS, "Median send slip (released - scheduled): how late the client released "
               f"requests. {STREAMS}", "stream", signed=True),
        Column("send_slip_ms_p99", MS, "99th percentile of the send slip; above 5 ms the client, not the engine, "
               f"limited the offered load. {STREAMS}", "stream", signed=True),
        Column("queue_ms_mean", MS, "Mean time requests waited to be scheduled, as the engine reports it. "
               f"{STREAMS}", "vllm, hf streams", signed=True),
        Column("saturated", "true/false", "`true` when the point's requests completed more than "
               "`stream.saturation_margin` slower than they were offered while the requests in flight kept rising; "
               f"empty where not judged (a burst, under 6 completed requests, a point not ok). {STREAMS}",
               "stream points with a rate"),
        Column("saturation_reason", TEXT, "Why a saturated point is: its completion and offered rates and the rise "
               f"of the requests in flight; empty otherwise. {STREAMS}", "saturated stream points"),
    ]
)
