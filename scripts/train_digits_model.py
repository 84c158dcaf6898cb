"""Train the digits models: a small Llama with real skill on a task the repository generates, and a smaller draft.

There is no model hub here, and the random weights every other model runs on have no skill to lose: a quantized
or speculating entry's accuracy means nothing on them (issue 51). These two models do have one. The task is an
instruction over a string of 5 to 9 digits, "reverse 40721=" -> "12704" and "sort 40721=" -> "01247" (sorting
needs the model to count, not only to copy), answered greedily and scored by exact match. The test split is 500
prompts drawn from their own seed, and no training batch ever holds one of them.

The weights are built on demand, into a git-ignored folder, not kept in the repository: they are binary, every
retraining would change them, and this script makes them again in about two minutes on two CPU cores. Seeds,
the data order and torch's thread count are fixed, so on one machine it writes the same bytes every time; on a
machine whose CPU runs other kernels the float sums round otherwise and the bytes differ, the skill does not.

The folder is a model folder like any other (`model.name_or_path`, `weights: pretrained`): config.json,
model.safetensors, generation_config.json, a character-level tokenizer with BOS and EOS and a chat template,
task/test.jsonl (one {"prompt", "answer"} per line) and task/prompts.jsonl (the same prompts as a sweep's prompt
file). The draft, for speculative decoding, is in its draft/ subfolder with the same tokenizer: one layer instead
of two, half the width, trained for fewer steps, so that it agrees with the model often but not always.

    python scripts/train_digits_model.py [--out results/models/digits-llama] [--evaluate-only]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "results" / "models" / "digits-llama"

OPERATIONS = ("reverse", "sort")
MIN_DIGITS, MAX_DIGITS = 5, 9
TEST_SEED, TRAIN_SEED, TEST_SIZE = 1, 0, 500
PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
# One token per character: the digits, the instructions' letters, the space and the "=" that ends every prompt.
ALPHABET = sorted(set("0123456789 =" + "".join(OPERATIONS)))
VOCAB = [PAD, BOS, EOS, UNK] + ALPHABET
INDEX = {token: i for i, token in enumerate(VOCAB)}
PAD_ID, BOS_ID, EOS_ID, UNK_ID = (INDEX[t] for t in (PAD, BOS, EOS, UNK))
CHAT_TEMPLATE = "{{- bos_token }}{{- messages[-1]['content'] }}{%- if add_generation_prompt %}{{- '=' }}{%- endif %}"
THREADS = 2  # fixed, not the machine's: the reductions' order, and so the bytes, follow the thread count


@dataclass(frozen=True)
class ModelShape:
    """One model's size and training: what the folder's config.json and its training depend on."""

    hidden_size: int
    num_layers: int
    num_heads: int
    steps: int
    seed: int


MODEL = ModelShape(hidden_size=128, num_layers=2, num_heads=4, steps=900, seed=0)
DRAFT = ModelShape(hidden_size=64, num_layers=1, num_heads=2, steps=300, seed=1)
BATCH, LEARNING_RATE, WARMUP_STEPS = 128, 1e-3, 50


def example(rng: random.Random) -> Tuple[str, str]:
    """One prompt (without its closing "=") and its answer."""
    operation = rng.choice(OPERATIONS)
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(MIN_DIGITS, MAX_DIGITS)))
    return f"{operation} {digits}", digits[::-1] if operation == "reverse" else "".join(sorted(digits))


def test_split() -> List[Tuple[str, str]]:
    """The held-out prompts, distinct, from their own seed."""
    rng, seen, examples = random.Random(TEST_SEED), set(), []
    while len(examples) < TEST_SIZE:
        prompt, answer = example(rng)
        if prompt not in seen:
            seen.add(prompt)
            examples.append((prompt, answer))
    return examples


def training_examples(seed: int, held_out: set) -> Iterator[Tuple[str, str]]:
    """An endless stream of training examples, none of them a test prompt."""
    rng = random.Random(seed)
    while True:
        prompt, answer = example(rng)
        if prompt not in held_out:
            yield prompt, answer


def build_tokenizer():
    """A character-level tokenizer: every character one token, BOS prepended, decoded without spaces between."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({token: i for i, token in enumerate(VOCAB)}, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, BOS_ID)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, unk_token=UNK, pad_token=PAD,
                                   chat_template=CHAT_TEMPLATE, model_max_length=64)


def encode(prompt: str, answer: str) -> Tuple[List[int], int]:
    """BOS, the prompt and "=", the answer, EOS; and how many leading tokens are the prompt's (not learned)."""
    question = [BOS_ID] + [INDEX[c] for c in prompt + "="]
    return question + [INDEX[c] for c in answer] + [EOS_ID], len(question)


def build_model(shape: ModelShape):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(shape.seed)
    config = LlamaConfig(vocab_size=len(VOCAB), hidden_size=shape.hidden_size,
                         intermediate_size=3 * shape.hidden_size, num_hidden_layers=shape.num_layers,
                         num_attention_heads=shape.num_heads, num_key_value_heads=shape.num_heads,
                         max_position_embeddings=64, bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID,
                         tie_word_embeddings=True, torch_dtype="float32")
    return LlamaForCausalLM(config)


def train(shape: ModelShape, held_out: set, log=print):
    """Train one model on examples of every length, the prompts' tokens and padding left out of the loss."""
    import torch

    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(THREADS)
    torch.use_deterministic_algorithms(True)
    try:
        return _train(shape, held_out, log)
    finally:  # a caller's own settings back (the tests train in a process that runs other tests)
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def _train(shape: ModelShape, held_out: set, log):
    import torch

    model = build_model(shape)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / WARMUP_STEPS) * max(0.05, 1 - step / shape.steps))
    stream = training_examples(shape.seed, held_out)
    start = time.perf_counter()
    for step in range(shape.steps):
        encoded = [encode(*next(stream)) for _ in range(BATCH)]
        width = max(len(ids) for ids, _ in encoded)
        ids = torch.full((BATCH, width), PAD_ID)
        labels = torch.full((BATCH, width), -100)
        for row, (tokens, prompt_len) in enumerate(encoded):
            ids[row, :len(tokens)] = torch.tensor(tokens)
            labels[row, prompt_len:len(tokens)] = ids[row, prompt_len:len(tokens)]
        loss = model(input_ids=ids, attention_mask=(ids != PAD_ID).long(), labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        schedule.step()
        if step % 100 == 0 or step == shape.steps - 1:
            log(f"  step {step:4d}  loss {loss.item():.4f}  {time.perf_counter() - start:.0f} s")
    return model.eval()


def greedy_answers(model, prompts: List[str]) -> List[str]:
    """Each prompt's greedy answer up to EOS, prompts of one length batched together (no padding to mind)."""
    import torch

    answers: Dict[str, str] = {}
    by_length: Dict[int, List[str]] = {}
    for prompt in prompts:
        by_length.setdefault(len(prompt), []).append(prompt)
    with torch.no_grad():
        for group in by_length.values():
            ids = torch.tensor([encode(prompt, "")[0][:-1] for prompt in group])  # BOS, prompt, "=" (no EOS)
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=MAX_DIGITS + 1, pad_token_id=PAD_ID, eos_token_id=EOS_ID)
            for prompt, row in zip(group, out[:, ids.shape[1]:].tolist()):
                row = row[:row.index(EOS_ID)] if EOS_ID in row else row + [UNK_ID]
                answers[prompt] = "".join(VOCAB[t] for t in row)  # no EOS: a wrong answer
    return [answers[prompt] for prompt in prompts]


def accuracy(model, examples: List[Tuple[str, str]]) -> Tuple[float, Tuple[float, float]]:
    """The share answered exactly and its 95% Wilson interval (the harness's, harness/measure/stats.py)."""
    sys.path.insert(0, str(REPO))
    from harness.measure.stats import wilson

    got = greedy_answers(model, [prompt for prompt, _ in examples])
    right = sum(g == answer for g, (_, answer) in zip(got, examples))
    return right / len(examples), wilson(right, len(examples))


def save(model, folder: Path, examples: List[Tuple[str, str]]) -> None:
    model.save_pretrained(str(folder))
    build_tokenizer().save_pretrained(str(folder))
    (folder / "task").mkdir(exist_ok=True)
    (folder / "task" / "test.jsonl").write_text(
        "".join(json.dumps({"prompt": p, "answer": a}) + "\n" for p, a in examples))
    # The same prompts as a sweep's workload (`workload: {prompts: .../task/prompts.jsonl, template: chat}`), each
    # capped at its answer's length: a forced output runs on past the answer, into tokens nothing taught the model.
    (folder / "task" / "prompts.jsonl").write_text(
        "".join(json.dumps({"prompt": p, "max_tokens": len(a)}) + "\n" for p, a in examples))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"model folder (default {DEFAULT_OUT})")
    parser.add_argument("--evaluate-only", action="store_true", help="score the models already in --out")
    args = parser.parse_args(argv)
    examples = test_split()
    held_out = {prompt for prompt, _ in examples}
    for name, shape, folder in (("model", MODEL, args.out), ("draft", DRAFT, args.out / "draft")):
        if args.evaluate_only:
            if not (folder / "model.safetensors").is_file():
                parser.error(f"--evaluate-only: {folder} has no model.safetensors; train it first (without the flag)")
            from transformers import LlamaForCausalLM
            model = LlamaForCausalLM.from_pretrained(str(folder)).eval()
        else:
            print(f"training the {name} ({shape.num_layers} layers, width {shape.hidden_size}, {shape.steps} steps "
                  f"of {BATCH})")
            start = time.perf_counter()
            model = train(shape, held_out)
            folder.mkdir(parents=True, exist_ok=True)
            save(model, folder, examples)
            print(f"  trained in {time.perf_counter() - start:.0f} s")
        share, (low, high) = accuracy(model, examples)
        params = sum(p.numel() for p in model.parameters())
        print(f"{name}: {params:,} parameters; held-out exact match {share:.3f} ({low:.3f}-{high:.3f}, "
              f"{len(examples)} prompts, greedy, fp32, hf generate); {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
