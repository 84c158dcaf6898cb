"""The `openai` backend: any OpenAI-compatible server, found at `base_url` or started by the harness, measured from
the client. backend.py finds or starts the server; client.py sends and times a stream's requests; chunks.py reads
what one SSE chunk carries; process.py starts and stops a server's process group."""
