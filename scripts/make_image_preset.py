"""Write the `tiny-llava-next` preset: a LLaVA-NeXT small enough to serve on a CPU, for images with the text
(docs/measurement.md, "Images with the text").

No hub here, and no package ships a small image-text model, so the preset is built from the repository's own parts:
tiny-llama's tokenizer (scripts/train_tokenizer.py) with an `<image>` token added, a ChatML template that writes an
image part as that token, a CLIP vision tower of 2 layers on 56-pixel tiles (so that 56, 112 and 168-pixel images
make 1, 4 and 9 tiles: the prompt grows with the image), and the PIL image processor's config (transformers' own
needs torchvision, which this machine lacks). Weights are the harness's random ones, written when a server needs
them ({checkpoint_dir}). Reproducible byte for byte:

    python scripts/make_image_preset.py [--out harness/presets/tiny-llava-next]
"""

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "harness" / "presets" / "tiny-llava-next"
TOKENIZER = REPO / "harness" / "presets" / "tiny-llama"
TILE_PX, PATCH_PX = 56, 14
PINPOINTS = [[56, 56], [56, 112], [112, 56], [112, 112], [112, 168], [168, 112], [168, 168]]
# ChatML as tiny-llama's, with a message's content either text or parts: an image part is the image token and a
# newline, as LLaVA's templates place it, a text part its text.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or part['type'] == 'image_url' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PROCESSOR = {"processor_class": "LlavaNextProcessor", "patch_size": PATCH_PX,
             "vision_feature_select_strategy": "default", "image_token": "<image>", "num_additional_image_tokens": 1}


def main() -> None:
    from transformers import AutoTokenizer, CLIPVisionConfig, LlamaConfig, LlavaNextConfig
    from transformers.models.llava_next.image_processing_pil_llava_next import LlavaNextImageProcessorPil

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              image_size=TILE_PX, patch_size=PATCH_PX, projection_dim=32)
    text = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    config = LlavaNextConfig(vision_config=vision, text_config=text,
                             image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
                             image_grid_pinpoints=PINPOINTS, vision_feature_layer=-1,
                             vision_feature_select_strategy="default", architectures=["LlavaNextForConditionalGeneration"])
    config.save_pretrained(out)
    LlavaNextImageProcessorPil(size={"shortest_edge": TILE_PX}, crop_size={"height": TILE_PX, "width": TILE_PX},
                               image_grid_pinpoints=PINPOINTS).save_pretrained(out)
    (out / "processor_config.json").write_text(json.dumps(PROCESSOR))
    print(f"wrote {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")


if __name__ == "__main__":
    main()
