"""Waiting is said, never silent: a sweep whose server is not up says every few seconds what it waits for, with the
latest line of the worker's log, when stdout is a file; the plan names where requests go; the entry ends with one
line naming the URL (harness/run/wait_notices.py, backends/openai_compat/backend.py)."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from harness.run import wait_notices
from harness.run.process_group import free_port
from harness.run.wait_notices import WaitNotices, last_log_line
from tests.conftest import REPO

CONNECT_TIMEOUT_S = 8


def test_a_wait_is_said_once_it_lasts_then_every_few_seconds(tmp_path):
    log = tmp_path / "worker.log"
    log.write_bytes(b"loading\nshards  10%\rshards  60%\r\n\n")
    said, now = [], [100.0]
    notices = WaitNotices("vllm", said.append, log, clock=lambda: now[0])
    notices.tick()  # nothing begun: nothing said
    notices.begin("its engine to load")
    now[0] += wait_notices.NOTICE_AFTER_S - 0.01
    notices.tick()
    assert said == []  # not yet NOTICE_AFTER_S
    now[0] += 0.02
    notices.tick()
    notices.tick()  # again at once: not yet NOTICE_EVERY_S later
    assert said == ["vllm: waiting 5 s for its engine to load (its log: shards 60%)"]
    now[0] += wait_notices.NOTICE_EVERY_S - 0.01
    notices.tick()
    assert len(said) == 1
    now[0] += 0.02
    notices.tick()
    assert said[1].startswith("vllm: waiting 15 s for its engine to load")
    notices.end()
    now[0] += 3 * wait_notices.NOTICE_EVERY_S
    notices.tick()
    assert len(said) == 2  # an ended wait says nothing more


def test_last_log_line_of_a_missing_or_empty_log(tmp_path):
    assert last_log_line(tmp_path / "none.log") == ""
    (tmp_path / "empty.log").write_text("\n \n")
    assert last_log_line(tmp_path / "empty.log") == ""


@pytest.mark.engine
def test_a_server_that_is_not_up_is_waited_for_aloud_then_named(tmp_path):
    port = free_port()
    config = tmp_path / "down.yaml"
    config.write_text(f"""benchmark_name: server-down
model: {{preset: tiny-llama, dtype: fp32}}
scenario: stream
backends:
  - {{name: openai, base_url: "http://127.0.0.1:{port}/v1", connect_timeout_s: {CONNECT_TIMEOUT_S}}}
input_lengths: [16]
output_lengths: [4]
stream: {{request_rates: [4], num_requests: 4, num_warmup_requests: 0}}
""")
    dry = subprocess.run([sys.executable, "benchmark.py", str(config), "--dry-run"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert f"backend openai: requests to http://127.0.0.1:{port}/v1/completions" in dry.stdout
    console = tmp_path / "console.txt"
    with open(console, "w") as stdout:  # a file, not a terminal: lines must still come, flushed
        proc = subprocess.run([sys.executable, "benchmark.py", str(config), "--output-dir", str(tmp_path / "out"),
                               "--no-plots"], cwd=REPO, stdout=stdout, stderr=subprocess.STDOUT, timeout=300)
    text = console.read_text()
    assert proc.returncode == 1, text[-3000:]
    waits = [line for line in text.splitlines() if line.startswith("openai: waiting ")]
    assert waits, text[-3000:]
    assert any(f"waiting for http://127.0.0.1:{port}/health to answer 200" in line for line in waits), waits
    with open(tmp_path / "out" / "results.csv") as f:
        (row,) = csv.DictReader(f)
    assert row["status"] == "error"
    assert f"nothing answered http://127.0.0.1:{port}/health within {CONNECT_TIMEOUT_S} s" in row["error"]
    assert Path(tmp_path / "out" / "manifest.json").exists()
