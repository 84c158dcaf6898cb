"""Train the tiny byte-level BPE tokenizer shipped with the `tiny-llama` preset.

There is no model hub here, so the preset's tokenizer is trained from text the repository owns:
the example chats of yamls/prompts/ (the README and docs change too often: every edit would
change the shipped tokenizer). It exists so that real text prompts can be benchmarked on
`tiny-llama`; its quality is irrelevant, only that every id is valid for the model and that the
result is reproducible byte for byte from the repository.

    python scripts/train_tokenizer.py [--out harness/presets/tiny-llama]
"""
import argparse
import json
import sys
import time
from pathlib import Path
from typing import Iterator, List

REPO = Path(__file__).resolve().parent.parent
PRESET_DIR = REPO / "harness" / "presets" / "tiny-llama"
CHATS_FILE = Path("yamls") / "prompts" / "example-chats.jsonl"

# Well under the model's 32000 so that every id the tokenizer emits indexes a real embedding row.
VOCAB_SIZE = 4096

# The first three ids must match the model config (bos_token_id 1, eos_token_id 2); the rest make
# the built-in chat formats' markers (ChatML, Llama-3, Llama-2) single tokens.
SPECIAL_TOKENS = [
    "<unk>", "<s>", "</s>",
    "<|im_start|>", "<|im_end|>",
    "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
    "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>",
]
BOS, EOS, UNK = "<s>", "</s>", "<unk>"

# ChatML. No BOS: apply_chat_template tokenizes with add_special_tokens=False, as ChatML models expect.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def corpus_files(repo: Path = REPO) -> List[Path]:
    """The training files: a list, so more text the repository owns can join in a fixed order."""
    return [repo / CHATS_FILE]


def _chat_strings(node) -> Iterator[str]:
    """Every "content" and "prompt" string in a JSON value, whatever the nesting, in document order."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("content", "prompt") and isinstance(value, str):
                yield value
            else:
                yield from _chat_strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _chat_strings(item)


def corpus_texts(repo: Path = REPO) -> List[str]:
    texts = []
    for path in corpus_files(repo):
        raw = path.read_text(encoding="utf-8")
        if path.suffix != ".jsonl":
            texts.append(raw)
            continue
        for line in raw.splitlines():
            if line.strip():
                texts.extend(_chat_strings(json.loads(line)))
    return texts


def train_bpe(texts: List[str]):
    """A byte-level BPE `tokenizers.Tokenizer` with BOS prepended by its post-processor."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        # All 256 bytes up front: any text encodes, and no id depends on which bytes the corpus has.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    bos_id = tok.token_to_id(BOS)
    # What Llama's add_bos_token does: add_special_tokens=True prepends <s>, and only that.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS}:1 $B:1", special_tokens=[(BOS, bos_id)])
    return tok


def wrap(tok, model_max_length: int):
    """The transformers tokenizer around `tok`, with the special tokens named and the chat template."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, unk_token=UNK, pad_token=EOS,
        chat_template=CHAT_TEMPLATE, model_max_length=model_max_length)


def preset_max_length() -> int:
    return json.loads((PRESET_DIR / "config.json").read_text())["max_position_embeddings"]


def train(out: Path, repo: Path = REPO):
    """Train on `repo`'s text and save the tokenizer into `out` (config.json there is left alone)."""
    hf_tok = wrap(train_bpe(corpus_texts(repo)), preset_max_length())
    out.mkdir(parents=True, exist_ok=True)
    hf_tok.save_pretrained(str(out))
    return hf_tok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PRESET_DIR, help="folder to save the tokenizer into")
    args = parser.parse_args(argv)
    files = corpus_files()
    start = time.perf_counter()
    tok = train(args.out)
    print(f"trained on {len(files)} files ({', '.join(f.relative_to(REPO).as_posix() for f in files)}) "
          f"in {time.perf_counter() - start:.1f}s: vocab {len(tok)}, saved to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
