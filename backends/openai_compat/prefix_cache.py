"""Emptying a server's prefix cache before each point: vLLM's `POST /reset_prefix_cache`, a development route that
vLLM registers only with VLLM_SERVER_DEV_MODE=1 (the harness sets it for a vLLM server it starts). A server without
the route answers 404 or 405: that is said once, in the entry's runtime info, and nothing is reset."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Dict, Optional

RESET_PATH = "/reset_prefix_cache"
ABSENT = (404, 405)  # no such route (405: the path exists, not for POST)
TRIES = 5
RETRY_S = 0.5  # vLLM refuses (success: false) while blocks are held, e.g. by a request still finishing


class PrefixCacheReset:
    """The reset of one server, at `root` (base_url without /v1)."""

    def __init__(self, root: str, headers: Dict[str, str]):
        self.url = root + RESET_PATH
        self.headers = headers
        self.absent: Optional[str] = None  # why nothing is reset, once the server said it has no such route
        self.clean = False  # the last reset succeeded and no request was sent since
        self.asked = False  # the runner asks before each point, and once at load, unless keep_prefix_cache

    def note(self) -> str:
        """The entry's runtime info `prefix_cache_reset` (read after the load, when the runner has asked once)."""
        if self.absent is not None:
            return self.absent
        return f"POST {self.url}" if self.asked else "not asked for (keep_prefix_cache: true)"

    def reset(self) -> None:
        """Empty the cache, retrying briefly while the server refuses; nothing where it has no route, or where nothing
        was sent since the last reset. A RuntimeError of one line when it keeps refusing or fails otherwise."""
        self.asked = True
        if self.absent is not None or self.clean:
            return
        for _ in range(TRIES):
            try:
                if self._post():
                    self.clean = True
                    return
            except urllib.error.HTTPError as e:
                if e.code in ABSENT:
                    self.absent = f"not available: POST {self.url} answered {e.code}"
                    return
                raise RuntimeError(f"POST {self.url} answered HTTP {e.code} (emptying the server's prefix cache; "
                                   "keep_prefix_cache: true runs without)") from None
            except (OSError, ValueError) as e:
                raise RuntimeError(f"POST {self.url} failed: {' '.join(str(e).split())} (emptying the server's "
                                   "prefix cache; keep_prefix_cache: true runs without)") from None
            time.sleep(RETRY_S)
        raise RuntimeError(f"the server refused to empty its prefix cache {TRIES} times in {TRIES * RETRY_S:g} s "
                           f"(POST {self.url} answered success: false, blocks still held)")

    def _post(self) -> bool:
        """POST the reset; False where the server answers `{"success": false}`."""
        request = urllib.request.Request(self.url, data=b"", method="POST", headers=self.headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        try:
            answer = json.loads(body)
        except ValueError:
            return True  # a 200 without JSON: done, as far as the server says
        return not (isinstance(answer, dict) and answer.get("success") is False)
