"""MLflow's REST API, the part a sweep needs (https://mlflow.org/docs/latest/api_reference/rest-api.html): no MLflow
package in the sweep's venv. DeepSpeed imports `mlflow` whenever it is installed (its autotuner), which cost every
DeepSpeed rank a second here; an HTTP client costs nothing.

Credentials as MLflow's own client reads them: MLFLOW_TRACKING_TOKEN (a bearer token), or MLFLOW_TRACKING_USERNAME
and MLFLOW_TRACKING_PASSWORD (basic auth). Artifacts go through the server's artifact proxy (`mlflow server`'s
default, `--serve-artifacts`): a server that hands out another store's address (s3://, a local path) is refused."""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

API = "/api/2.0/mlflow"
ARTIFACTS_API = "/api/2.0/mlflow-artifacts/artifacts"
PROXIED = "mlflow-artifacts:/"  # a run's artifact_uri where the server proxies its artifacts
TIMEOUT_S = 30.0
# A tracker that is down must not hold the sweep up: two retries, a second apart, of what may pass on a retry.
RETRIES, RETRY_WAIT_S = 2, 1.0
RETRIED_STATUS = (429, 500, 502, 503, 504)


class MlflowError(RuntimeError):
    """The server refused a call (its error code and message), or could not be reached."""


class MlflowRest:
    def __init__(self, tracking_uri: str):
        self.base = tracking_uri.rstrip("/")
        self.headers = {"Content-Type": "application/json", **_auth_headers()}

    # --- experiments and runs ------------------------------------------------------------------------------------

    def experiment_id(self, name: str) -> Optional[str]:
        try:
            return self._call("GET", "/experiments/get-by-name", query={"experiment_name": name})["experiment"][
                "experiment_id"]
        except MlflowError as e:
            if "RESOURCE_DOES_NOT_EXIST" in str(e):
                return None
            raise

    def create_experiment(self, name: str) -> str:
        return self._call("POST", "/experiments/create", {"name": name})["experiment_id"]

    def create_run(self, experiment_id: str, name: str, tags: Dict[str, str]) -> str:
        body = {"experiment_id": experiment_id, "run_name": name, "start_time": _now_ms(),
                "tags": [{"key": k, "value": v} for k, v in tags.items()]}
        return self._call("POST", "/runs/create", body)["run"]["info"]["run_id"]

    def search_runs(self, experiment_id: str, filter_string: str) -> List[Dict[str, Any]]:
        body = {"experiment_ids": [experiment_id], "filter": filter_string, "max_results": 1000}
        return self._call("POST", "/runs/search", body).get("runs", [])

    def get_run(self, run_id: str) -> Dict[str, Any]:
        return self._call("GET", "/runs/get", query={"run_id": run_id})["run"]

    def log_batch(self, run_id: str, metrics: Sequence[Dict[str, Any]] = (),
                  params: Sequence[Dict[str, str]] = ()) -> None:
        self._call("POST", "/runs/log-batch", {"run_id": run_id, "metrics": list(metrics), "params": list(params)})

    def set_terminated(self, run_id: str, status: str) -> None:
        self._call("POST", "/runs/update", {"run_id": run_id, "status": status, "end_time": _now_ms()})

    def log_artifact(self, run: Dict[str, Any], path: Path, artifact_path: Optional[str]) -> None:
        """Upload the file at `path` as `artifact_path/<its name>` of `run` (get_run's), through the proxy."""
        where = run["info"]["artifact_uri"]
        if not where.startswith(PROXIED):
            raise MlflowError(f"the server keeps this run's artifacts at {where}, which the harness cannot write; "
                              "start it with --serve-artifacts (mlflow server's default) to have it take them")
        name = "/".join(p for p in (artifact_path, path.name) if p)
        target = f"{self.base}{ARTIFACTS_API}/{where[len(PROXIED):].strip('/')}/{urllib.parse.quote(name)}"
        self._send("PUT", target, path.read_bytes(), {**self.headers, "Content-Type": "application/octet-stream"})

    # --- HTTP ------------------------------------------------------------------------------------------------------

    def _call(self, method: str, endpoint: str, body: Optional[Dict[str, Any]] = None,
              query: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        url = f"{self.base}{API}{endpoint}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        answer = self._send(method, url, data, self.headers)
        try:
            return json.loads(answer) if answer.strip() else {}
        except ValueError:
            raise MlflowError(f"{url} answered with no JSON: {answer[:80]!r}") from None

    def _send(self, method: str, url: str, data: Optional[bytes], headers: Dict[str, str]) -> bytes:
        for attempt in range(RETRIES + 1):
            request = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                    return response.read()
            except urllib.error.HTTPError as e:
                if e.code not in RETRIED_STATUS or attempt == RETRIES:
                    raise MlflowError(_refusal(e)) from None
            except (urllib.error.URLError, OSError) as e:
                if attempt == RETRIES:
                    reason = getattr(e, "reason", e)
                    raise MlflowError(f"cannot reach {self.base} ({reason})") from None
            time.sleep(RETRY_WAIT_S * (attempt + 1))
        raise AssertionError("unreachable")


def _refusal(error: urllib.error.HTTPError) -> str:
    """HTTP 400 INVALID_PARAMETER_VALUE: its message, as MLflow's JSON error says it."""
    try:
        found = json.loads(error.read() or b"{}")
    except ValueError:
        found = {}
    code, message = found.get("error_code", ""), found.get("message", error.reason)
    return f"HTTP {error.code} {code}: {' '.join(str(message).split())[:200]}".replace("  ", " ")


def _auth_headers() -> Dict[str, str]:
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    if token:
        return {"Authorization": f"Bearer {token}"}
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    return {}


def _now_ms() -> int:
    return int(time.time() * 1000)
