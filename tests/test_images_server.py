"""Images with the text against a real `transformers serve` on 127.0.0.1 running the tiny LLaVA-NeXT (the
tiny-llava-next preset, the harness's random weights written as a checkpoint), started and stopped by the backend:
yamls/cpu-images.yaml's entries sent to it through benchmark.py (one at two image sizes, one without images), and an
entry sending two files per request; rows, requests and report checked (docs/measurement.md, "Images with the text")."""

import csv

import pytest
import yaml
from PIL import Image as PILImage

from tests.conftest import REPO
from tests.test_openai_server import make_backend, sweep_on_server

SIZES_PX = (56, 168)
FILE_SIZES_PX = ((112, 56), (56, 112))  # (width, height): LLaVA-NeXT tiles both into two 56-pixel crops


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The YAML's entry at SIZES_PX and an entry with image files, sent to one server: the output folder."""
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model

    config = yaml.safe_load((REPO / "yamls" / "cpu-images.yaml").read_text())
    entry = config["backends"][0]
    served = resolve_model(ModelConfig(**config["model"]))
    backend = make_backend(served, command=entry["command"], model=entry["model"], endpoint="chat")
    folder = tmp_path_factory.mktemp("images")
    files = []
    for i, size in enumerate(FILE_SIZES_PX):
        files.append(str(folder / f"photo-{i}.png"))
        PILImage.new("RGB", size, (200, 40 * i, 0)).save(files[-1])
    entry["grid"] = {"images.width_px": list(SIZES_PX)}
    config["backends"].append({**entry, "label": "files", "grid": {}, "images": {"count": 2, "files": files}})
    config["stream"].update(request_rates=[4], num_requests=8, num_warmup_requests=1)
    config["workload"]["prompts"] = str(REPO / "yamls" / config["workload"]["prompts"])
    sweep_on_server(backend, config, folder)
    return folder / "out"


@pytest.mark.engine
def test_the_servers_prompt_count_grows_with_the_image(sweep):
    rows = {r["backend"]: r for r in csv.DictReader(open(sweep / "results.csv"))}
    small, large = (rows[f"transformers-serve[images.width_px={size}]"] for size in SIZES_PX)
    for size, row in zip(SIZES_PX, (small, large)):
        assert row["status"] == "ok" and row["requests_failed"] == "0"
        assert float(row["images_per_request"]) == 1 and float(row["image_pixels_mean"]) == size * size
    # the same prompts, so the difference is the images' tokens: LLaVA-NeXT's 16 for the whole image downscaled, 16
    # per 56-pixel tile and one per row of them (36 at 56 pixels, 172 at 168), and the template's newline after it
    assert float(large["input_tokens_mean"]) - float(small["input_tokens_mean"]) == pytest.approx(172 - 36)
    both = rows["files"]
    assert both["status"] == "ok" and float(both["images_per_request"]) == 2
    assert float(both["image_pixels_mean"]) == 112 * 56
    assert float(small["input_tokens_mean"]) < float(both["input_tokens_mean"]) < float(large["input_tokens_mean"])
    text = rows["text-only"]  # the same prompts alone
    assert text["images_per_request"] == "" and text["image_pixels_mean"] == ""
    assert float(small["input_tokens_mean"]) - float(text["input_tokens_mean"]) == pytest.approx(36 + 1)


@pytest.mark.engine
def test_each_request_records_its_images_and_the_report_lists_them(sweep):
    requests = list(csv.DictReader(open(sweep / "requests.csv")))
    assert len(requests) == 4 * 8 and all(r["error"] == "" for r in requests)
    for r in requests:
        if r["backend"] == "text-only":
            assert r["images"] == r["image_pixels"] == ""
            continue
        expected = (2, 2 * 112 * 56) if r["backend"] == "files" else (1, int(r["backend"].split("=")[1][:-1]) ** 2)
        assert (int(r["images"]), int(r["image_pixels"])) == expected
        assert r["output_tokens_source"] == "usage"  # the server's count, image tokens in input_tokens
    report = (sweep / "plots" / "report.md").read_text()
    section = report.split("## Images with the text", 1)[1].split("\n## ", 1)[0]
    assert "| transformers-serve[images.width_px=168] | 4/s | 1 | 28,224 |" in section
    assert "| files | 4/s | 2 | 6,272 |" in section
