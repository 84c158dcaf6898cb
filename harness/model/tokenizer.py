"""Which tokenizer turns a prompt file into token ids, loaded without surprises.

There is no hub on many benchmark machines, and random weights have no tokenizer of their own:
the tokenizer comes from `model.tokenizer`, else `model.name_or_path`, else the preset's folder
where one ships (tiny-llama, trained by scripts/train_tokenizer.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

from harness.config.sections import ModelConfig
from harness.errors import UserError
from harness.files import read_utf8
from harness.model.spec import PRESETS_DIR, ModelSpec

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")


def tokenizer_source(config: ModelConfig) -> Optional[str]:
    if config.tokenizer or config.name_or_path:
        return config.tokenizer or config.name_or_path
    assert config.preset is not None  # validate_model: a section without name_or_path names a preset
    preset = PRESETS_DIR / config.preset
    return str(preset) if any((preset / name).is_file() for name in TOKENIZER_FILES) else None


def load_tokenizer(model: ModelSpec):
    """The tokenizer of the model's section, checked to emit only ids the model has an embedding row for."""
    config, key = model.section, model.key
    assert config is not None  # resolve_model records the section of every model a sweep tokenizes for
    source = tokenizer_source(config)
    if source is None:
        raise UserError(f"{key}.tokenizer: required with a prompt file; preset {config.preset} ships no tokenizer "
                        "(set model.tokenizer to a tokenizer folder or hub id)")
    if source.startswith((".", "/", "~")) and not Path(source).expanduser().is_dir():
        raise UserError(f"{key}.tokenizer: no such folder {source!r}")
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except Exception as e:  # OSError, ValueError or hub errors, depending on what is missing
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{key}.tokenizer: cannot load a tokenizer from {source!r} ({reason})") from None
    vocab = model.config.vocab_size
    if len(tokenizer) > vocab:
        raise UserError(f"{key}.tokenizer: {source} has {len(tokenizer)} tokens, more than {model.label}'s "
                        f"vocab_size ({vocab}); its ids would index past the embedding table")
    return tokenizer


def text_token_ids(model: ModelSpec, path: str, max_tokens: int) -> Tuple[int, ...]:
    """The first `max_tokens` ids of a text file as the model's tokenizer encodes it (special tokens included, as
    perplexity is usually measured: a BOS where the tokenizer adds one)."""
    try:
        text = read_utf8(Path(path), "text")
    except UserError as e:
        raise UserError(f"quality.text: {e}") from None
    ids = tuple(load_tokenizer(model)(text)["input_ids"][:max_tokens])
    if len(ids) < 2:
        raise UserError(f"quality.text: {path!r} holds {len(ids)} token(s); perplexity needs at least 2")
    return ids
