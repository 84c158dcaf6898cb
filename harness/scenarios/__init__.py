"""How work is submitted to an engine: a static batch (batch.py: what a backend is given and hands back), a stream
of requests at scheduled times (stream.py, arrivals.py, static_batching.py), and the searches over batch size and
request rate.
"""
