"""A model with random weights written to disk as a checkpoint, for servers that can only load files.

vLLM and SGLang build dummy weights themselves from a config.json; `transformers serve`, TGI and llama.cpp load
a real checkpoint. The weights are the harness's own deterministic ones (harness/model/weights.py), so the greedy
tokens of a server that loads them can be compared with those of the in-process engines.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.model import weights
from harness.model.spec import ModelSpec
from harness.model.tokenizer import tokenizer_source

# Copied next to the weights, where the model's tokenizer folder has them, so that the server can tokenize
# (a chat template included) and detokenize; an image-text model's processor files too, so that it can read images.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json", "vocab.json", "merges.txt", "chat_template.jinja", "preprocessor_config.json",
                   "processor_config.json")


def copy_tokenizer_files(model: ModelSpec, folder: Path) -> None:
    """The tokenizer files of the model's tokenizer folder (model.tokenizer, its name_or_path or its preset's), if
    it is a local folder; a hub id is left to the server."""
    assert model.section is not None  # resolve_model records the section of every model an engine serves
    source = tokenizer_source(model.section)
    if source is None or not Path(source).expanduser().is_dir():
        return
    folder.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        path = Path(source).expanduser() / name
        if path.is_file():
            shutil.copyfile(path, folder / name)


def write_random_checkpoint(model: ModelSpec, folder: Path) -> Path:
    """config.json, model.safetensors (the deterministic random weights, in the model's dtype) and the tokenizer
    files in `folder`. Built on the CPU, so it needs the model's size in host memory and on disk: meant for the
    small models a CPU machine serves, not for a 70B one."""
    import torch

    net = weights.build_empty(model.hf_config, model.torch_dtype)
    weights.materialize(net, torch.device("cpu"), init_range=weights.init_range_of(model.hf_config))
    net.save_pretrained(folder)
    copy_tokenizer_files(model, folder)
    return folder
