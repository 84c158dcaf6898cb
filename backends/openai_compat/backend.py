"""Any OpenAI-compatible completions server (vLLM, SGLang, TGI, ...), measured from the client: `scenario: stream`.

The harness either sends to a server that is already running (`base_url`) or starts one itself (`command`)
on a free port of 127.0.0.1 and stops its whole process group in `close()`. Requests are streamed
`POST /v1/completions` calls with the prompt as token ids (backends/openai_compat/client.py); every SSE chunk that carries
tokens is stamped on arrival with the harness's clock, so TTFT and TPOT include the server's HTTP and detokenizing
path, as vLLM's own serving benchmark (`vllm bench serve`) measures them.

In backends/openai_compat/, not backends/openai.py, so that nothing can shadow the `openai` package.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from backends.base import Backend, BackendOptions, Placement
from backends.openai_compat.client import HARNESS_FIELDS, CompletionsClient
from backends.openai_compat.process import exit_wording, log_tail, start_server, stop_group
from backends.vllm_architectures import removed_architecture
from harness.errors import UserError
from harness.fields import opt
from harness.model.memory import MemoryEstimate
from harness.run.process_group import free_port
from harness.scenarios.batch import BatchSpec, BatchTiming
from harness.scenarios.stream import StreamSpec, StreamTiming, paused_gc

# Copied next to the resolved config.json, when the model's folder has them, so that the server can detokenize.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json", "vocab.json", "merges.txt", "chat_template.jinja")
POLL_S = 0.25
# Waiting for a server: a line into the worker's log this often (the sweep's console shows the latest).
PROGRESS_EVERY_S = 5.0


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
        "tokenizer files, for dummy weights; the model's own name_or_path with pretrained weights)."
    )
    model: Optional[str] = opt(None, help="`model` sent in every request; default: the first id of GET /v1/models.")
    api_key_env: Optional[str] = opt(None, help="Environment variable holding an API key, sent as a Bearer token.")
    health_path: str = opt("/health", help="GET path, from the server's root (base_url without /v1), that answers "
                           "200 once the server is ready.")
    startup_timeout_s: float = opt(600.0, help="With command: seconds the server the harness starts may take to "
                                   "answer health_path with 200.")
    connect_timeout_s: float = opt(30.0, help="With base_url: seconds a server that refuses connections is waited "
                                   "for (it may still be starting); any answer other than 200 ends the entry at once.")
    request_timeout_s: float = opt(600.0, help="Seconds one request may take, from sending to its last chunk.")
    continuous_usage_stats: bool = opt(
        True, help="Ask for usage in every chunk (vLLM's stream_options.continuous_usage_stats), which tells how "
        "many tokens each chunk carries; off for servers that reject it (then every chunk counts as one token)."
    )
    extra_body: Dict[str, Any] = opt(factory=dict, help="Merged into every request body, e.g. {repetition_penalty: 1.0}.")

    def validate(self, key: str) -> None:
        if (self.base_url is None) == (self.command is None):
            raise UserError(f"{key}.base_url: set exactly one of {key}.base_url (a running server) and "
                            f"{key}.command (the harness starts it)")
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise UserError(f"{key}.base_url: {self.base_url!r} is not an http:// or https:// URL")
        if self.command is not None:
            try:
                words = shlex.split(self.command)
            except ValueError as e:
                raise UserError(f"{key}.command: cannot split it into words ({e})") from None
            if not words:
                raise UserError(f"{key}.command: is empty")
            if "{port}" not in self.command:
                raise UserError(f"{key}.command: must contain {{port}}, the port the harness picks and sends to")
        if not self.health_path.startswith("/"):
            raise UserError(f"{key}.health_path: must start with '/', got {self.health_path!r}")
        for name in ("startup_timeout_s", "connect_timeout_s", "request_timeout_s"):
            if getattr(self, name) <= 0:
                raise UserError(f"{key}.{name}: must be more than 0 s, got {getattr(self, name)}")
        if self.api_key_env is not None and not os.environ.get(self.api_key_env):
            raise UserError(f"{key}.api_key_env: environment variable {self.api_key_env} is not set")
        for field_name in self.extra_body:
            if field_name in HARNESS_FIELDS:
                raise UserError(f"{key}.extra_body.{field_name}: set by the harness from the sweep "
                                f"({', '.join(HARNESS_FIELDS)} are)")


def server_root(base_url: str) -> str:
    """The server's root from `base_url` as users write it: with or without a trailing `/v1` and slash. Requests go
    to root + /v1/..., health to root + health_path (vLLM and SGLang answer /health at the root, not under /v1)."""
    root = base_url.strip().rstrip("/")
    return root[:-len("/v1")] if root.endswith("/v1") else root


def health_refusal(url: str, status: int) -> str:
    """One line for a running server whose health check answered `status`, not 200: what it means, what to set."""
    if status == 404:
        fix = ("the server has no such path; set health_path to one it answers with 200 (vLLM, SGLang and TGI answer "
               "/health at the root, which is base_url without /v1)")
    elif status in (401, 403):
        fix = "the server wants an API key; set api_key_env to the environment variable that holds it"
    elif status >= 500:
        fix = "the server is up but not healthy (still loading, or failing); see its log, then run again"
    else:
        fix = "set health_path to a path this server answers with 200"
    return f"{url} answered HTTP {status}, not 200: {fix}"


def starts_vllm(command: Optional[str]) -> bool:
    """Whether a server command runs vLLM: `vllm serve ...`, or `python -m vllm.entrypoints.openai.api_server`."""
    try:
        words = shlex.split(command or "")
    except ValueError:
        return False  # validate() names the problem
    return any(Path(word).name == "vllm" or word.startswith("vllm.") for word in words)


class OpenAIBackend(Backend):
    """Sends each request of a stream to `/v1/completions` when it is due; the server batches them its way."""

    Options = OpenAIOptions
    engine_modules = ("aiohttp",)
    uses_hf_config = False
    scenarios = ("stream",)

    @classmethod
    def unsupported(cls, options: OpenAIOptions, scenario: str, model) -> Optional[str]:
        """A server the harness starts with vLLM (`command`) cannot serve what vLLM's registry lists as removed; what
        a running server (`base_url`) holds is not known here."""
        reason = super().unsupported(options, scenario, model)
        if reason or model is None or not starts_vllm(options.command):
            return reason
        removed = removed_architecture(model)
        return f"the server command starts vLLM: {removed}" if removed else None

    @classmethod
    def resolve_placement(cls, options: OpenAIOptions) -> Placement:
        """Placement(device="cpu"): the harness side is only an HTTP client on one CPU. The server's devices are the
        server's business (a remote machine, or whatever the command asks for): none are claimed here, so the plan
        never skips the entry for lack of GPUs, and peak_memory_bytes is the client's, not the server's."""
        return Placement(device="cpu")

    @classmethod
    def destination(cls, options: OpenAIOptions) -> Optional[str]:
        if options.base_url is not None:
            return f"requests to {server_root(options.base_url)}/v1/completions"
        return "requests to the server its command starts, on a free port of 127.0.0.1"

    @classmethod
    def estimate_memory(cls, options: OpenAIOptions, model, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate:
        """The server's memory is not the harness's to plan: nothing is estimated and no point is skipped for it."""
        return MemoryEstimate(0, 0, 0)

    # --- start-up -------------------------------------------------------------------------------------------

    def load(self) -> None:
        o = self.options
        self._proc: Optional[subprocess.Popen] = None
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.argv: Optional[List[str]] = None
        try:
            if o.command is not None:
                self.base_url = self._start_server()
            else:
                self.base_url = server_root(o.base_url)
                self._wait_healthy()
            self.served_model = o.model or self._first_model()
            self.server_version = self._server_version()
        except BaseException:
            self.close()
            raise
        headers = {"Content-Type": "application/json", **self._auth_headers()}
        self.client = CompletionsClient(self.base_url, self.served_model, headers, o.request_timeout_s,
                                        o.continuous_usage_stats, o.extra_body)
        self._loop = asyncio.new_event_loop()

    def _start_server(self) -> str:
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-openai-")
        tmp = Path(self._tmp.name)
        self.port = free_port()
        values = {"{python}": sys.executable, "{port}": str(self.port)}
        if "{model_dir}" in self.options.command:
            values["{model_dir}"] = self._model_dir(tmp / "model")
        self.argv = [self._fill(word, values) for word in shlex.split(self.options.command)]
        self.log_path = tmp / "server.log"
        self._proc = start_server(self.argv, self.log_path)
        self.server_pid = self._proc.pid
        base_url = f"http://127.0.0.1:{self.port}"
        self._wait_healthy(base_url)
        return base_url

    @staticmethod
    def _fill(word: str, values: Dict[str, str]) -> str:
        """Placeholders are filled word by word after splitting, so a path with spaces stays one argument."""
        for placeholder, value in values.items():
            word = word.replace(placeholder, value)
        return word

    def _model_dir(self, folder: Path) -> str:
        """Random weights: the sweep's resolved config.json plus the model's tokenizer files, so the server builds
        exactly this architecture (with its own dummy weights) and can detokenize. Pretrained: the model itself."""
        if self.model.weights == "pretrained":
            return self.model.source
        self.model.write_config_folder(folder)
        source = Path(self.model.source)
        if source.is_dir():
            for name in TOKENIZER_FILES:
                if (source / name).is_file():
                    (folder / name).write_bytes((source / name).read_bytes())
        return str(folder)

    def _wait_healthy(self, base_url: Optional[str] = None) -> None:
        """Poll GET health_path until it answers 200. A server the harness started may answer otherwise while it
        loads, until startup_timeout_s; a running one (base_url) may only refuse connections, until
        connect_timeout_s: any other answer is final. A started server that exits ends the wait at once."""
        url = (base_url or self.base_url) + self.options.health_path
        started_here = self._proc is not None
        timeout_s = self.options.startup_timeout_s if started_here else self.options.connect_timeout_s
        start = time.monotonic()
        last, said_at = "no answer", start - PROGRESS_EVERY_S  # the first miss is said at once
        while True:
            self._check_alive(url)
            try:
                request = urllib.request.Request(url, headers=self._auth_headers())
                with urllib.request.urlopen(request, timeout=min(5.0, timeout_s)) as response:
                    if response.status == 200:
                        return
                    last = f"HTTP {response.status}"
            except urllib.error.HTTPError as e:
                if not started_here:
                    raise RuntimeError(health_refusal(url, e.code)) from None
                last = f"HTTP {e.code}"
            except (OSError, ValueError) as e:  # refused while it starts, timeouts, a malformed URL
                last = " ".join(str(getattr(e, "reason", e)).split())
            waited_s = time.monotonic() - start
            if waited_s > timeout_s:
                raise RuntimeError(self._never_healthy(url, timeout_s, last))
            if time.monotonic() - said_at >= PROGRESS_EVERY_S:
                said_at = time.monotonic()
                print(f"waiting for {url} to answer 200: {last} ({waited_s:.0f} of {timeout_s:g} s)", flush=True)
            time.sleep(POLL_S)

    def _check_alive(self, url: str) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"server {exit_wording(self._proc.returncode)} before answering {url} "
                               f"(command: {shlex.join(self.argv)}); last lines of its log: "
                               f"{log_tail(self.log_path) or '(empty)'}")

    def _never_healthy(self, url: str, timeout_s: float, last: str) -> str:
        if self._proc is not None:
            return (f"server did not answer {url} with 200 within {timeout_s:g} s (last: {last}); last lines of its "
                    f"log: {log_tail(self.log_path) or '(empty)'}")
        return (f"nothing answered {url} within {timeout_s:g} s (last: {last}): start the server, or fix base_url "
                "(connect_timeout_s says how long a starting server is waited for)")

    def _get_json(self, path: str) -> Any:
        request = urllib.request.Request(self.base_url + path, headers=self._auth_headers())
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def _auth_headers(self) -> Dict[str, str]:
        env = self.options.api_key_env
        return {"Authorization": f"Bearer {os.environ[env]}"} if env and os.environ.get(env) else {}

    def _first_model(self) -> str:
        try:
            models = self._get_json("/v1/models").get("data") or []
        except (OSError, ValueError) as e:
            raise RuntimeError(f"cannot list the server's models (GET {self.base_url}/v1/models: {e}); set "
                               "the backend's `model` option") from None
        if not models:
            raise RuntimeError(f"GET {self.base_url}/v1/models lists no model; set the backend's `model` option")
        return str(models[0]["id"])

    def _server_version(self) -> Optional[str]:
        try:
            return str(self._get_json("/version").get("version"))
        except (OSError, ValueError, AttributeError):
            return None  # not every server has /version

    # --- requests -------------------------------------------------------------------------------------------

    def run(self, batch: BatchSpec) -> BatchTiming:
        raise NotImplementedError("the openai backend runs scenario: stream only (scenarios = ('stream',))")

    def serve(self, stream: StreamSpec) -> StreamTiming:
        with paused_gc():
            return self._loop.run_until_complete(self.client.serve(stream))

    # --- the rest -------------------------------------------------------------------------------------------

    def engine_stats(self) -> Dict[str, object]:
        return {"batching": "server"}

    def runtime_info(self) -> Dict[str, object]:
        """Where the requests went and what answered; the architecture is the server's (not visible from here)."""
        info: Dict[str, object] = {"base_url": self.base_url, "model": self.served_model,
                                   "server_version": self.server_version}
        if self.options.command is not None:
            info["command"] = self.options.command
            info["argv"] = self.argv
        return info

    def close(self) -> None:
        """Stop the server this backend started (its whole process group) and drop its temp folder. Idempotent."""
        proc = getattr(self, "_proc", None)
        if proc is not None:
            stop_group(proc)
            self._proc = None
        loop = getattr(self, "_loop", None)
        if loop is not None:
            loop.close()
            self._loop = None
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()
            self._tmp = None
