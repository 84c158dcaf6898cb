"""The columns of the files with a row per timed batch, per request, per server scrape and per accuracy task."""

from __future__ import annotations

from harness.measure.columns.base import (
    ACCURACY, COUNT, Column, INDEX, JOULES, MS, MULTI_TURN, PER_BATCH, PREFIXES, RATIO, ROOFLINE, S, SHARE, STREAMS,
    IMAGES, IMAGES_WHERE, LORA, PIXELS, POOLING, REASONING, STRUCTURED, TOOLS,
    TEXT, TOKENS, draft_counters, keyed, leading,
)


# --- samples.csv: one row per timed batch ------------------------------------------------------------------------

SAMPLES = keyed(leading("batch") + [
    Column("batch_index", INDEX, "The batch's 0-based index among the point's timed batches.", "all"),
    Column("latency_ms", MS, f"Submitting the batch until its outputs are back on the host. {PER_BATCH}", "all"),
    Column("ttft_ms", MS, "Submitting the batch until every sequence has its first output token (the whole "
           f"batch's prefill). {PER_BATCH}", "all"),
    Column("tpot_ms", MS, "(the batch's last output token - the TTFT instant) / (the longest sequence's output "
           f"tokens - 1): time per decode step; empty when no sequence produced two tokens. {PER_BATCH}", "all"),
    Column("input_tokens", TOKENS, "Real prompt tokens summed over the batch's sequences (padding excluded). "
           f"{PER_BATCH}", "all"),
    Column("output_tokens", TOKENS, f"Output tokens summed over the batch's sequences. {PER_BATCH}", "all"),
    Column("min_output_tokens", TOKENS, f"The shortest sequence's output tokens. {PER_BATCH}", "all"),
    *draft_counters("in this batch"),
    Column("energy_j", JOULES, "NVML energy of every GPU of the entry, read right before and after the batch. "
           f"{ROOFLINE}", "GPU (NVML)"),
])

# --- requests.csv: one row per timed request of a stream --------------------------------------------------------

COMPLETED = "completed requests"
REQUESTS = keyed(leading("stream") + [
    Column("request_index", INDEX, "The request's 0-based index in the timed stream (in a multi-turn stream every "
           "turn is a request).", "all"),
    Column("scheduled_s", S, f"When it was due, from the stream's start; its latencies start here. {STREAMS}", "all"),
    Column("dispatched_s", S, f"When the client released it. {STREAMS}", "all"),
    Column("sent_s", S, "When it reached the engine: after waiting for a `max_concurrency` slot, or the start of the "
           f"hf static batch that took it. {STREAMS}", "all"),
    Column("first_token_s", S, f"Its first output token; empty if none came. {STREAMS}", "all"),
    Column("last_token_s", S, f"Its last output token; empty if none came. {STREAMS}", "all"),
    Column("input_tokens", TOKENS, "Prompt tokens as the engine or server counted them (a server's "
           "`usage.prompt_tokens` where given), a shared prefix and a conversation's history included. "
           f"{STREAMS}", "all"),
    Column("cached_tokens", TOKENS, f"Prompt tokens the engine served from its prefix cache, as it reports them. "
           f"{PREFIXES}", "vllm; openai servers that report them"),
    Column("output_tokens", TOKENS, f"Output tokens it produced, counted as `output_tokens_source` says. {STREAMS}",
           "all"),
    Column("output_tokens_source", TEXT, "`engine` (its token ids), `usage` (the server's final usage), `tokenizer` "
           "(the text re-tokenized), `chunks` (one per streamed chunk), or `none`: an embeddings or rerank request, "
           f"which makes no output tokens. {STREAMS}", "all"),
    Column("ttft_ms", MS, f"First token - scheduled arrival. {STREAMS}", COMPLETED),
    Column("ttft_answer_ms", MS, "The answer's first token - scheduled arrival: after the reasoning a server streams "
           f"apart from the answer. {REASONING}", "completed requests of servers that stream reasoning apart"),
    Column("tpot_ms", MS, f"(last token - first token) / (output tokens - 1); empty for one token. {STREAMS}",
           COMPLETED),
    Column("e2e_ms", MS, f"Last token - scheduled arrival. {STREAMS}", COMPLETED),
    Column("itl_ms_mean", MS, "Mean gap between consecutive token hand-overs after the first (a hand-over may carry "
           f"several tokens). {STREAMS}", COMPLETED),
    Column("itl_ms_max", MS, f"The longest of those gaps. {STREAMS}", COMPLETED),
    Column("send_slip_ms", MS, f"Released - scheduled: how late the client released it. {STREAMS}", "all", signed=True),
    Column("client_wait_ms", MS, "Sent - released: waiting at the client for a concurrency slot (or a static "
           f"batch). {STREAMS}", "all", signed=True),
    Column("queue_ms", MS, "Time the engine reports the request waited to be scheduled. "
           f"{STREAMS}", "completed requests of vllm, hf", signed=True),
    Column("met_slo", "0/1", "1 when `ttft_ms` <= `slo_ttft_ms` and (`tpot_ms` <= `slo_tpot_ms` or it has one "
           f"token); 0 otherwise, failed requests included. {STREAMS}", "all"),
    Column("error", TEXT, "Why the request failed (engine or HTTP error, timeout, wrong token count, `not sent: ...`); "
           f"empty when it completed. {STREAMS}", "all"),
    Column("conversation", INDEX, f"Its conversation's index in the stream. {MULTI_TURN}", "multi-turn streams"),
    Column("turn", INDEX, f"Its 1-based turn within the conversation. {MULTI_TURN}", "multi-turn streams"),
    Column("context_tokens", TOKENS, f"The prompt it was sent with, history included (= `input_tokens`). "
           f"{MULTI_TURN}", "multi-turn streams"),
    Column("reasoning_tokens", TOKENS, "Output tokens streamed as reasoning apart from the answer (the server's "
           f"count where its usage has one; part of `output_tokens`). {REASONING}",
           "servers that stream reasoning apart"),
    Column("inputs", COUNT, "The inputs (embeddings) or documents (rerank) it carried; its answer came whole, so its "
           f"`ttft_ms` is its `e2e_ms`. {POOLING}", "openai entries with endpoint embeddings or rerank"),
    Column("adapter", TEXT, f"The LoRA adapter it named (`lora-0`, ...), drawn from the entry's `lora.mix`. {LORA}",
           "entries with a lora section"),
    Column("images", COUNT, f"The images it carried with its text (the entry's `images.count`). {IMAGES}",
           IMAGES_WHERE),
    Column("image_pixels", PIXELS, f"Their pixels (width x height) summed. {IMAGES}", IMAGES_WHERE),
    Column("answer_valid", "0/1", "1 when its whole answer parsed as JSON and met `workload.json_schema`, or called "
           "a tool of `workload.tools` with arguments that meet its parameters; 0 when it did not (cut at its budget "
           f"included); empty for a failed request. {STRUCTURED} {TOOLS}",
           "streams with workload.json_schema or workload.tools"),
])

# --- server_metrics/*.csv: one row per scrape of a stream's server --------------------------------------------

# The file exists only where a server was scraped; a series is empty where the server exposes none of its names.
SERVER_SERIES_WHERE = "vLLM, SGLang, TGI servers"
SERVER_METRICS = keyed([
    Column("t_s", S, "Scrape time from the stream's start (the first scrape, just before it, can be negative).",
           "all"),
    Column("requests_running", COUNT, "The server's running-requests gauge, summed over label sets (vLLM, SGLang, "
           f"TGI names). {STREAMS}", SERVER_SERIES_WHERE),
    Column("requests_waiting", COUNT, f"Its waiting-requests gauge. {STREAMS}", SERVER_SERIES_WHERE),
    Column("kv_cache_usage", SHARE, f"Its KV-cache usage, as a fraction of the cache. {STREAMS}",
           "vLLM, SGLang servers"),
    Column("preemptions", COUNT, f"vLLM's cumulative preemption counter. {STREAMS}", "vLLM servers"),
    Column("prefix_cache_hits", TOKENS, f"vLLM's cumulative prefix-cache hits, in tokens. {STREAMS}",
           "vLLM servers"),
    Column("prefix_cache_queries", TOKENS, f"vLLM's cumulative prefix-cache queries, in tokens. {STREAMS}",
           "vLLM servers"),
])

# --- accuracy.csv: one row per entry and accuracy task ----------------------------------------------------------

ACCURACY_TASKS = keyed([
    Column("backend", TEXT, "The entry's label, as in results.csv.", "all", required=True),
    Column("task", TEXT, f"The task: a task file's stem, or an lm-evaluation-harness task. {ACCURACY}", "all",
           required=True),
    Column("metric", TEXT, "`exact_match` for a task file (its tokens, then EOS or the end of its budget); "
           f"lm-eval's metric and filter for its tasks (`exact_match,strict-match`). {ACCURACY}", "all"),
    Column("examples", COUNT, f"Examples the entry answered. {ACCURACY}", "all"),
    Column("correct", COUNT, f"Examples answered exactly. {ACCURACY}", "task files"),
    Column("value", RATIO, "The metric's value: for a task file the share answered exactly; for lm-eval's, as the "
           f"task defines it (most are shares 0-1). {ACCURACY}", "all", signed=True, beyond_one=True),
    Column("ci95_low", SHARE, f"Low end of the share's 95% Wilson interval. {ACCURACY}", "task files"),
    Column("ci95_high", SHARE, f"High end of the share's 95% Wilson interval. {ACCURACY}", "task files"),
    Column("stderr", RATIO, f"The value's standard error, as lm-eval computes it. {ACCURACY}", "lm-eval tasks"),
    Column("evaluated", TEXT, "How the entry answered: decoding, through which engine instance or server, how many "
           f"at a time. {ACCURACY}", "all"),
])
