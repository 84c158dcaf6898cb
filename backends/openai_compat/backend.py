"""Any OpenAI-compatible server (vLLM, SGLang, TGI, transformers serve, ...), measured from the client: `scenario:
stream`.

The harness either sends to a server that is already running (`base_url`) or starts one itself (`command`)
on a free port of 127.0.0.1 and stops its whole process group in `close()`. Requests are streamed
`POST /v1/completions` calls with the prompt as token ids, or calls with a prompt file's messages to
`/v1/chat/completions`, `/v1/responses` or `/v1/messages` (`endpoint: chat`, `responses`, `messages`: the server
applies its chat template); backends/openai_compat/client.py sends them, and stamps every SSE event that carries tokens on arrival with the harness's clock, so TTFT and TPOT include the
server's HTTP and detokenizing path, as vLLM's own serving benchmark (`vllm bench serve`) measures them.

In backends/openai_compat/, not backends/openai.py, so that nothing can shadow the `openai` package.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from backends.base import Backend, Placement
from backends.openai_compat import lm_eval, lora, server_metrics
from backends.openai_compat.client import ANTHROPIC_VERSION, ENDPOINTS, CompletionsClient
from backends.openai_compat.command import arg_values, expand, fill
from backends.openai_compat.options import OpenAIOptions, server_root, starts_vllm
from backends.openai_compat.prefix_cache import PrefixCacheReset
from backends.openai_compat.process import exit_wording, log_tail, start_server, stop_group
from backends.vllm_engine.architectures import removed_architecture
from harness.errors import UserError
from harness.model.checkpoint import copy_tokenizer_files, write_random_checkpoint
from harness.model.memory import MemoryEstimate
from harness.model.tokenizer import load_tokenizer, tokenizer_source
from harness.run.process_group import free_port
from harness.scenarios.accuracy import LmEvalTasks
from harness.scenarios.adapter_mix import with_adapters
from harness.scenarios.stream import StreamSpec, StreamTiming, paused_gc

POLL_S = 0.25
# Waiting for a server: a line into the worker's log this often (the sweep's console shows the latest).
PROGRESS_EVERY_S = 5.0


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


class OpenAIBackend(Backend[OpenAIOptions]):
    """Sends each request of a stream to the server's `endpoint` when it is due; the server batches them its way."""

    Options = OpenAIOptions
    engine_modules = ("aiohttp",)
    uses_hf_config = False
    scenarios = ("stream",)
    serves_lm_eval = True  # lm-eval's local-completions model reaches the server (score_lm_eval)
    serves_image_models = True  # whatever the server serves; images go in chat requests (OpenAIOptions.images)

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
            return f"requests to {server_root(options.base_url)}{ENDPOINTS[options.endpoint]}"
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
        self._values: Dict[str, str] = {}  # the command's placeholders, filled
        try:
            if o.command is not None:
                self.base_url = self._start_server(o.command)
            else:
                assert o.base_url is not None  # validate(): exactly one of base_url and command
                self.base_url = server_root(o.base_url)
                self._wait_healthy()
            self.served_model = fill(o.model, self._values) if o.model else self._first_model()
            self.server_version = self._server_version()
            tokenizer = self._output_tokenizer()
            if o.endpoint == "rerank" and tokenizer is None:
                raise RuntimeError("endpoint: rerank sends its query and documents as text, and the model has no "
                                   "tokenizer here to write the prompts as text")
            self.metrics_url = self.base_url + o.metrics_path if o.metrics_path else None
            self.metrics_note = server_metrics.probe(self.metrics_url, self._auth_headers()) if self.metrics_url \
                else "metrics_path: null, not scraped"
            self.prefix_cache = PrefixCacheReset(self.base_url, self._auth_headers())
        except BaseException:
            self.close()
            raise
        headers = {"Content-Type": "application/json", **self._auth_headers()}
        if o.endpoint == "messages":  # Anthropic's API: its version header, the key as x-api-key (vLLM reads Bearer)
            headers["anthropic-version"] = ANTHROPIC_VERSION
            headers.update({"x-api-key": headers["Authorization"][len("Bearer "):]} if "Authorization" in headers
                           else {})
        self.client = CompletionsClient(self.base_url, self.served_model, headers, o.request_timeout_s,
                                        o.continuous_usage_stats, o.extra_body, o.endpoint, o.extensions, tokenizer,
                                        o.guided_decoding, o.inputs_per_request, o.images)
        self._loop = asyncio.new_event_loop()

    def _start_server(self, command: str) -> str:
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-openai-")
        tmp = Path(self._tmp.name)
        self.port = free_port()
        self._values = {"{python}": sys.executable, "{port}": str(self.port), **arg_values(self.options.server_args)}
        if "{model_dir}" in command:
            self._values["{model_dir}"] = self._model_dir(tmp / "model", with_weights=False)
        if "{checkpoint_dir}" in command:
            self._values["{checkpoint_dir}"] = self._model_dir(tmp / "checkpoint", with_weights=True)
        modules = lora.made_modules(self.model, self.options.lora, tmp / "adapters", self._values)
        self.argv = expand(shlex.split(command), self._values, modules)
        self.log_path = tmp / "server.log"
        # vLLM has POST /reset_prefix_cache (emptied before each point) only in its development mode.
        env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"} if starts_vllm(command) else None
        env = lora.server_env(self.options.lora, tmp / "adapters", env)
        self._proc = start_server(self.argv, self.log_path, env)
        self.server_pid = self._proc.pid
        base_url = f"http://127.0.0.1:{self.port}"
        self._wait_healthy(base_url)
        return base_url

    def _model_dir(self, folder: Path, with_weights: bool) -> str:
        """Random weights: the sweep's resolved config.json plus the model's tokenizer files, so the server builds
        exactly this architecture and can (de)tokenize; with the harness's random weights too for a server that
        cannot make dummy ones. Pretrained: the model itself."""
        if self.model.weights == "pretrained":
            return self.model.source
        if with_weights:
            return str(write_random_checkpoint(self.model, folder))
        self.model.write_config_folder(folder)
        copy_tokenizer_files(self.model, folder)
        return str(folder)

    def _output_tokenizer(self):
        """What counts the output of a server that sends no `usage`: the model's tokenizer, where it has one that
        loads here; else None, and such a server's chunks are counted (`output_tokens_source` says which)."""
        section = self.model.section
        assert section is not None  # the sweep's model is a resolved section (resolve_model)
        if tokenizer_source(section) is None:
            return None
        try:
            return load_tokenizer(self.model)
        except UserError:
            return None

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

    def _ended(self) -> Optional[Tuple[str, str]]:
        """How the server this backend started ended, and its log's last lines; None while it runs (or for base_url)."""
        if self._proc is None or self._proc.poll() is None:
            return None
        return exit_wording(self._proc.returncode), f"last lines of its log: {log_tail(self.log_path) or '(empty)'}"

    def _check_alive(self, url: str) -> None:
        ended = self._ended()
        if ended:
            how, log = ended
            assert self.argv is not None  # only a server _start_server started (from argv) can end
            raise RuntimeError(f"server {how} before answering {url} (command: {shlex.join(self.argv)}); {log}")

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

    def serve(self, stream: StreamSpec) -> StreamTiming:
        """The stream's requests; a failed one is a request's error (kept, counted), not the point's. A server the
        harness started that has died since ends each later point at once, saying so."""
        self._check_still_up()
        assert self._loop is not None  # load() made it; only close() drops it
        self.prefix_cache.clean = False
        scraper = None
        if self.metrics_note is None:
            assert self.metrics_url is not None  # the note is None only once metrics_url answered the probe
            scraper = server_metrics.Scraper(self.metrics_url, self._auth_headers(), self.options.metrics_interval_s)
            scraper.start()
        stream = with_adapters(stream, self.options.lora)  # each request names its adapter, drawn from the mix
        try:
            with paused_gc():
                timing = self._loop.run_until_complete(self.client.serve(stream))
        finally:
            if scraper is not None:
                scraper.stop()
        return timing if scraper is None else dataclasses.replace(timing, server=scraper.series(timing.start_s))

    # --- the rest -------------------------------------------------------------------------------------------

    def reset_prefix_cache(self) -> None:
        """POST /reset_prefix_cache (vLLM's); nothing for a server without it (runtime info says which). A started
        server that has died says so first, as `serve` would."""
        self._check_still_up()
        self.prefix_cache.reset()

    def _check_still_up(self) -> None:
        """A server the harness started that has died since ends each later point at once, saying so."""
        ended = self._ended()
        if ended:
            how, log = ended
            raise RuntimeError(f"the server {how} during the sweep; {log}")

    def engine_stats(self) -> Dict[str, object]:
        """`prefix_caching` where a started server's command says it (vLLM's flags); else unknown."""
        words = self.argv or []
        caching = False if "--no-enable-prefix-caching" in words else True if "--enable-prefix-caching" in words \
            else None
        return {"batching": "server", "prefix_caching": caching}

    def answered_by(self) -> str:
        return f"the server this entry timed ({self.client.url})"

    def score_lm_eval(self, tasks: LmEvalTasks) -> Dict[str, object]:
        """lm-eval's local-completions model at this server's /v1/completions (backends/openai_compat/lm_eval.py)."""
        self._check_still_up()
        self.prefix_cache.clean = False
        return {"lm_eval": lm_eval.evaluate(self.base_url + ENDPOINTS["completions"], self.served_model, tasks,
                                            self._auth_headers())}

    def runtime_info(self) -> Dict[str, object]:
        """Where the requests went and what answered; the architecture is the server's (not visible from here)."""
        info: Dict[str, object] = {"base_url": self.base_url, "model": self.served_model,
                                   "server_version": self.server_version}
        if self.options.command is not None:
            info["command"] = self.options.command
            info["argv"] = self.argv  # as run: every placeholder filled, server_args' values too
            info["server_pid"] = self.server_pid
        info["server_metrics"] = self.metrics_note or (f"GET {self.metrics_url} every "
                                                        f"{self.options.metrics_interval_s:g} s while a stream runs")
        info["prefix_cache_reset"] = self.prefix_cache.note()
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
