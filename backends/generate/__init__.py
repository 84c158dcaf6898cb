"""The engines timed through HF `generate`, one family: base.py (`GenerateEngine`, `GenerateOptions`: what they all
share), hf.py (`hf`: streams, speculation, quantization), accelerate_pp.py (`accelerate`), deepspeed_tp.py
(`deepspeed`) and deepspeed_zero.py (`deepspeed_zero`), with their helpers beside them. backends/registry.py names the
registered classes; nothing is imported here, so that a helper's import loads no engine."""
