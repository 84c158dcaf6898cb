"""The `stream` section of a sweep (`scenario: stream`), the scenario axis's config: section.py (the keys, rates,
caps, the SLO and the rate search), arrival_keys.py (the shapes of arrivals beyond their rate), traces.py (a trace
file read and checked at load, windowed)."""

from harness.config.stream.section import (
    ARRIVALS,
    RELEASE_POLICIES,
    RateSearchConfig,
    SLOConfig,
    StreamConfig,
    TraceWindow,
    replay_trace,
    validate_stream,
)

__all__ = ["ARRIVALS", "RELEASE_POLICIES", "RateSearchConfig", "SLOConfig", "StreamConfig", "TraceWindow",
           "replay_trace", "validate_stream"]
