"""Requests that pool, not generate: `endpoint: embeddings` (POST /v1/embeddings) and `endpoint: rerank` (POST
/v1/rerank, as vLLM, TEI's and Cohere's APIs have it). Each answer comes whole, with no tokens streamed: its latency
is from the request's scheduled arrival to the last byte of its answer, and it carries `inputs_per_request` inputs
(docs/measurement.md, "Embeddings and rerank").

Request i's inputs are the stream's prompts i, i+1, ..., i+k-1 (k = inputs_per_request, wrapping round the stream),
so a request of k inputs is k prompts of the point's input length, never one prompt repeated (a server may cache a
repeat). Embeddings are sent as token ids, exactly the harness's prompts; a rerank request's query is the first half
of prompt i as text and its documents the second halves of its k prompts, so every (query, document) pair the server
scores is one prompt's length, as in vLLM's own rerank benchmark. Text, because the rerank APIs take no token ids.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from harness.scenarios.stream import StreamSpec

POOLING_ENDPOINTS = ("embeddings", "rerank")
MAX_INPUTS_PER_REQUEST = 4096  # far past what servers batch in one request (vLLM: its max_num_seqs)


def input_indices(stream: StreamSpec, index: int, inputs: int) -> List[int]:
    """The prompts request `index` carries: its own and the next `inputs - 1`, wrapping round the stream."""
    n = stream.num_requests
    return [(index + j) % n for j in range(inputs)]


def request_body(endpoint: str, model: str, stream: StreamSpec, index: int, inputs: int, tokenizer: Any,
                 extra_body: Dict[str, Any]) -> bytes:
    """Request `index`'s JSON body: its prompts as `input` (embeddings) or a query and documents (rerank)."""
    prompts = [list(stream.requests.prompts[j]) for j in input_indices(stream, index, inputs)]
    body: Dict[str, Any] = {"model": model}
    if endpoint == "embeddings":
        body["input"] = prompts
    else:
        if tokenizer is None:
            raise RuntimeError("endpoint: rerank sends text and the model has no tokenizer here to write its prompts "
                               "as text")
        unwritten = max(max(ids, default=0) for ids in prompts)
        if unwritten >= len(tokenizer):  # random ids past the tokenizer's own: no text, the pairs would be short
            raise RuntimeError(f"endpoint: rerank writes the prompts as text, and token id {unwritten} is past the "
                               f"tokenizer's {len(tokenizer)} tokens; with random weights set model.overrides."
                               f"vocab_size: {len(tokenizer)}, or use a prompt file")
        half = len(prompts[0]) // 2
        body["query"] = tokenizer.decode(prompts[0][:half])
        body["documents"] = [tokenizer.decode(ids[len(ids) // 2:]) for ids in prompts]
    body.update(extra_body)
    return json.dumps(body).encode()


def harness_input_tokens(endpoint: str, stream: StreamSpec, index: int, inputs: int) -> int:
    """The harness's count of what request `index` sent, for a server whose answer has no usage: the prompts'
    tokens; for rerank every (query, document) pair's, as a cross-encoder scores them."""
    prompts = [stream.requests.prompts[j] for j in input_indices(stream, index, inputs)]
    if endpoint == "embeddings":
        return sum(len(ids) for ids in prompts)
    half = len(prompts[0]) // 2
    return sum(half + len(ids) - len(ids) // 2 for ids in prompts)


def read_answer(endpoint: str, answer: Any, inputs: int) -> Optional[int]:
    """The server's usage.prompt_tokens (None where it sends none) from a whole answer, which must hold one result
    per input: one embedding per input, one score per document. RuntimeError, in one line, otherwise."""
    if not isinstance(answer, dict):
        raise RuntimeError(f"the answer is not a JSON object: {json.dumps(answer)[:80]}")
    key, what = ("data", "embeddings") if endpoint == "embeddings" else ("results", "scores")
    results = answer.get(key)
    if not isinstance(results, list):
        raise RuntimeError(f"the answer has no `{key}` list of {what}: {json.dumps(answer)[:120]}")
    if len(results) != inputs:
        raise RuntimeError(f"the server answered {len(results)} {what} for {inputs} inputs")
    field = "embedding" if endpoint == "embeddings" else "relevance_score"
    for item in results:
        if not isinstance(item, dict) or field not in item:
            raise RuntimeError(f"an item of `{key}` has no `{field}`: {json.dumps(item)[:80]}")
    usage = answer.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
        raise RuntimeError(f"usage.prompt_tokens is not a positive count: {tokens!r}")
    return tokens
