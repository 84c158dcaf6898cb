"""The `openai` backend's options: where the server is (or how to start it), what to send it, and how to check them
before anything runs."""

from __future__ import annotations

import os
import shlex
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

from backends.base import BackendOptions
from backends.openai_compat.client import (
    CONVERSATION_ENDPOINTS,
    ENDPOINTS,
    EXTENSIONS,
    HARNESS_FIELDS,
    SCHEMA_FIELDS,
    TOOL_FIELDS,
)
from backends.openai_compat.command import check_lora, check_server_args
from backends.openai_compat.images import ImagesConfig
from backends.openai_compat.pooling import MAX_INPUTS_PER_REQUEST, POOLING_ENDPOINTS
from harness.files import beside_yaml
from harness.errors import UserError
from harness.fields import WEEK_S, opt


@dataclass
class OpenAIOptions(BackendOptions):
    base_url: Optional[str] = opt(
        None, help="A running server to send to, e.g. http://127.0.0.1:8000 or http://127.0.0.1:8000/v1 (the "
        "harness only sends requests). Exactly one of base_url and command."
    )
    command: Optional[str] = opt(
        None, help="Command line that starts the server; the harness runs it, waits for it to be healthy and "
        "stops it at the end. Placeholders: {python} (the harness's interpreter), {port} (a free port on "
        "127.0.0.1, required), {model_dir} (a folder with the sweep's resolved config.json and the model's "
        "tokenizer files, for servers that make dummy weights: vLLM, SGLang), {checkpoint_dir} (the same plus the "
        "harness's random weights as model.safetensors, for servers that load files: transformers serve, TGI); "
        "with pretrained weights both are the model's own name_or_path; with a lora section {lora_modules} (the "
        "adapters it makes, as name=path words), {lora_adapters} and {lora_rank}. Any other {NAME} is a key of "
        "server_args."
    )
    server_args: Dict[str, Any] = opt(
        factory=dict, help="With command: values the command takes as placeholders {NAME}, each written as YAML "
        "writes it (true, 16, fp8), e.g. {max_num_seqs: 16} for a command with --max-num-seqs {max_num_seqs}. A grid "
        "over server_args.NAME starts one server per value. Every key must appear in the command."
    )
    model: Optional[str] = opt(None, help="`model` sent in every request; default: the first id of GET /v1/models. "
                               "With command, {model_dir} and {checkpoint_dir} are filled in as in the command.")
    endpoint: str = opt("completions", help="completions (POST /v1/completions, the prompt as token ids) | chat "
                        "(POST /v1/chat/completions with a prompt file's messages) | responses (OpenAI's POST "
                        "/v1/responses, the messages as `input`) | messages (Anthropic's POST /v1/messages; it "
                        "cannot ask for exactly max_tokens tokens, so a forced output length is only checked). With "
                        "those three the server applies its own chat template, so the workload's template must be "
                        "`chat`, the tokenizer's. | embeddings (POST /v1/embeddings, the prompts as token ids) | "
                        "rerank (POST /v1/rerank, a query and documents as text): answers that come whole, with no "
                        "output tokens, in a sweep of their own without output_lengths.")
    inputs_per_request: int = opt(
        1, ge=1, le=MAX_INPUTS_PER_REQUEST, unit="inputs", help="With endpoint embeddings: the prompts each request "
        "carries; with rerank: the documents scored against each query. A grid over it makes it a sweep axis.")
    images: Optional[ImagesConfig] = opt(
        None, help="Images sent with each request's text (endpoint: chat; the model must take images): count per "
        "request, and width_px and height_px of generated ones (random pixels, each distinct) or files; a grid over "
        "images.width_px or images.count makes them sweep axes. The server counts the prompt, image tokens included.")
    extensions: str = opt(
        "vllm", help="How a request asks for what OpenAI's API cannot say (exactly max_tokens tokens, top_k): vllm "
        "(ignore_eos, min_tokens, top_k fields: vLLM, SGLang) | transformers (a generation_config with EOS off: "
        "transformers serve) | none (OpenAI's fields only; a forced output length is then only checked)."
    )
    guided_decoding: bool = opt(
        True, help="With workload.json_schema: ask the server to hold every answer to the schema (response_format, "
        "the Responses API's text.format, the Messages API's output_config.format); false: send the prompts alone "
        "(the schema's cost is the difference), and check the answers either way. With workload.tools: the server "
        "must call a tool (tool_choice required, the Messages API's any); false: it may (auto).")
    api_key_env: Optional[str] = opt(None, help="Environment variable holding an API key, sent as a Bearer token "
                                     "(and as x-api-key with endpoint: messages, as Anthropic's API takes it).")
    health_path: str = opt("/health", help="GET path, from the server's root (base_url without /v1), that answers "
                           "200 once the server is ready.")
    startup_timeout_s: float = opt(
        600.0, gt=0, le=WEEK_S, unit="seconds", measures=False, help="With command: seconds the server the harness "
                "starts may take to "
                                   "answer health_path with 200.")
    connect_timeout_s: float = opt(
        30.0, gt=0, le=WEEK_S, unit="seconds", measures=False, help="With base_url: seconds a server that refuses "
                "connections is waited "
                                   "for (it may still be starting); any answer other than 200 ends the entry at once.")
    metrics_path: Optional[str] = opt(
        "/metrics", help="GET path, from the server's root, of its Prometheus metrics, scraped while each stream runs "
        "(requests running and waiting, KV-cache usage, preemptions, prefix-cache hits: vLLM, SGLang, TGI); where "
        "the server has none, a note in the manifest. null: not scraped.")
    metrics_interval_s: float = opt(
        0.5, gt=0, le=WEEK_S, unit="seconds", help="Seconds between two scrapes of metrics_path.")
    request_timeout_s: float = opt(
        600.0, gt=0, le=WEEK_S, unit="seconds", help="Seconds one request may take, from sending to its last chunk.")
    continuous_usage_stats: bool = opt(
        True, help="Ask for usage in every chunk (vLLM's stream_options.continuous_usage_stats), which tells how "
        "many tokens each chunk carries; off for servers that reject it (then every chunk counts as one token)."
    )
    extra_body: Dict[str, Any] = opt(factory=dict,
                                     help="Merged into every request body, e.g. {repetition_penalty: 1.0}.")

    holds_answers_to_a_schema = True  # workload.json_schema: asked for through the API, every answer checked

    def cannot_profile(self) -> Optional[str]:
        return "openai sends requests to a server whose process the harness does not profile"

    def validate(self, key: str) -> None:
        if (self.base_url is None) == (self.command is None):
            raise UserError(f"{key}.base_url: set exactly one of {key}.base_url (a running server) and "
                            f"{key}.command (the harness starts it)")
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise UserError(f"{key}.base_url: {self.base_url!r} is not an http:// or https:// URL")
        if self.base_url is not None:
            try:
                parsed = urllib.parse.urlsplit(self.base_url)
                parsed.port  # noqa: B018: urllib checks the port's range when it is read
            except ValueError as e:
                raise UserError(f"{key}.base_url: {self.base_url!r} is not a URL ({e})") from None
            if not parsed.hostname or parsed.port == 0 or parsed.query or parsed.fragment:
                raise UserError(f"{key}.base_url: {self.base_url!r} is not a server's address (scheme://host:port, "
                                "optionally /v1: no port 0, query or fragment)")
        if self.command is not None:
            try:
                words = shlex.split(self.command)
            except ValueError as e:
                raise UserError(f"{key}.command: cannot split it into words ({e})") from None
            if not words:
                raise UserError(f"{key}.command: is empty")
            if "{port}" not in self.command:
                raise UserError(f"{key}.command: must contain {{port}}, the port the harness picks and sends to")
            check_server_args(key, self.command, self.server_args)
            check_lora(key, self.command, self.lora)
        elif self.server_args:
            raise UserError(f"{key}.server_args: fills placeholders of {key}.command; a running server (base_url) "
                            "takes none")
        if self.base_url is not None and self.startup_timeout_s != OpenAIOptions.startup_timeout_s:
            raise UserError(f"{key}.startup_timeout_s: is how long a server the harness starts (command) may take; "
                            "with base_url use connect_timeout_s")
        for name, allowed in (("endpoint", ENDPOINTS), ("extensions", EXTENSIONS)):
            if getattr(self, name) not in allowed:
                raise UserError(f"{key}.{name}: {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        if self.inputs_per_request != 1 and not self.pools:
            raise UserError(f"{key}.inputs_per_request: sets the inputs of an embeddings or rerank request; endpoint "
                            f"{self.endpoint} sends one prompt per request")
        if self.images is not None:
            if self.endpoint != "chat":
                raise UserError(f"{key}.images: are sent as a chat message's image_url parts; set endpoint: chat, "
                                f"not {self.endpoint}")
            self.images.validate(f"{key}.images")
        for name in ("health_path", "metrics_path"):
            path = getattr(self, name)
            if path is not None and not path.startswith("/"):
                raise UserError(f"{key}.{name}: must start with '/', got {path!r}")
        if self.api_key_env is not None and not self.api_key_env.strip():
            raise UserError(f"{key}.api_key_env: must name an environment variable, got an empty name")
        if self.api_key_env is not None and not os.environ.get(self.api_key_env):
            raise UserError(f"{key}.api_key_env: environment variable {self.api_key_env} is not set")
        for field_name in self.extra_body:
            if field_name in HARNESS_FIELDS:
                raise UserError(f"{key}.extra_body.{field_name}: set by the harness from the sweep "
                                f"({', '.join(HARNESS_FIELDS)} are)")

    def cannot_serve_lora(self) -> Optional[str]:
        if self.pools:
            return f"endpoint {self.endpoint} requests name no adapter here; use endpoint completions or chat"
        if self.command is None:
            return ("the adapters the harness makes are loaded by a server it starts: give command (vLLM with "
                    "--lora-modules {lora_modules}), not base_url")
        return None

    def resolve_paths(self, config_dir: Path) -> None:
        if self.images is not None and self.images.files is not None:
            self.images.files = [beside_yaml(config_dir, p) for p in self.images.files]

    def validate_model(self, key: str, model) -> None:
        if self.images is not None and not model.takes_images:
            raise UserError(f"{key}.images: {model.label} (model_type {model.config.model_type}) takes no images; "
                            "serve an image-text model (e.g. model.preset: tiny-llava-next)")

    @property
    def pools(self) -> bool:
        """Embeddings or rerank: answers that come whole, with no output tokens (pooling.py)."""
        return self.endpoint in POOLING_ENDPOINTS

    def validate_workload(self, key: str, workload) -> None:
        if self.lora is not None and getattr(workload, "multi_turn", False):
            raise UserError(f"{key}.lora: each request names an adapter of its own, and a conversation's turns would "
                            "not share one; use single-turn prompts (workload.multi_turn: false)")
        if self.images is not None and getattr(workload, "multi_turn", False):
            raise UserError(f"{key}.images: go with each request's own prompt, and a conversation's later turns would "
                            "send its history's images again; use single-turn prompts (workload.multi_turn: false)")
        if self.pools and getattr(workload, "multi_turn", False):
            raise UserError(f"{key}.endpoint: {self.endpoint} answers have no text a conversation's next turn could "
                            "follow; use single-turn prompts (workload.multi_turn: false)")
        if getattr(workload, "json_schema", None) is not None:
            if self.endpoint not in CONVERSATION_ENDPOINTS:
                raise UserError(f"{key}.endpoint: answers held to workload.json_schema go through endpoint chat, "
                                f"responses or messages, not {self.endpoint}")
            field = SCHEMA_FIELDS[self.endpoint]
            if field in self.extra_body and self.guided_decoding:
                raise UserError(f"{key}.extra_body.{field}: set by the harness from workload.json_schema; remove "
                                "it, or set guided_decoding: false")
        if getattr(workload, "tools", None) is not None:
            if self.endpoint not in CONVERSATION_ENDPOINTS:
                raise UserError(f"{key}.endpoint: answers that call workload.tools go through endpoint chat, "
                                f"responses or messages, not {self.endpoint}")
            for field in TOOL_FIELDS[self.endpoint]:
                if field in self.extra_body:
                    raise UserError(f"{key}.extra_body.{field}: set by the harness from workload.tools; remove it")
        if self.endpoint not in CONVERSATION_ENDPOINTS:
            return
        api = self.endpoint
        if workload.prefix.prefix_tokens:
            raise UserError(f"{key}.endpoint: {api} sends the conversations' text, and workload.prefix is token ids "
                            "put in front of each prompt; use endpoint: completions, or a system prompt "
                            "(workload.system_prompt) as the shared prefix")
        if workload.prompts == "random":
            raise UserError(f"{key}.endpoint: {api} sends a prompt file's messages, but workload.prompts is random "
                            "(token ids, which go to endpoint: completions); set workload.prompts to a prompt file")
        template = getattr(workload, "template", "chat")
        if template != "chat":
            raise UserError(f"{key}.endpoint: {api} has the server apply its own chat template, which the harness "
                            f"counts and plans with as workload.template: chat, not {template}; set workload.template: "
                            f"chat, or endpoint: completions to send the {template}-templated prompts as token ids")


def server_root(base_url: str) -> str:
    """The server's root from `base_url` as users write it: with or without a trailing `/v1` and slash. Requests go
    to root + /v1/..., health to root + health_path (vLLM and SGLang answer /health at the root, not under /v1)."""
    root = base_url.strip().rstrip("/")
    return root[:-len("/v1")] if root.endswith("/v1") else root


def starts_vllm(command: Optional[str]) -> bool:
    """Whether a server command runs vLLM: `vllm serve ...`, or `python -m vllm.entrypoints.openai.api_server`."""
    try:
        words = shlex.split(command or "")
    except ValueError:
        return False  # validate() names the problem
    return any(Path(word).name == "vllm" or word.startswith("vllm.") for word in words)
