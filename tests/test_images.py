"""Images with the text without a server: the images each request carries, how a chat body holds them, the model
that takes them, and the point's figures (docs/measurement.md, "Images with the text"). Against transformers serve
running the tiny LLaVA-NeXT: tests/test_images_server.py."""

import base64
import io
import json

import pytest
from PIL import Image as PILImage

from backends.generate.hf import HFBackend, HFOptions
from backends.openai_compat.backend import OpenAIBackend
from backends.openai_compat.client import CompletionsClient
from backends.openai_compat.images import ImagesConfig, read_image_file, request_images
from backends.openai_compat.options import OpenAIOptions
from harness.config.sections import ModelConfig
from harness.errors import UserError
from harness.measure.metrics import summarize_stream
from harness.measure.records import SLO
from harness.model.spec import resolve_model
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import RequestTiming, StreamSpec, StreamTiming

LLAVA = resolve_model(ModelConfig(preset="tiny-llava-next", dtype="fp32"))


def decoded(data_url: str):
    kind, payload = data_url.split(",", 1)
    return kind, PILImage.open(io.BytesIO(base64.b64decode(payload)))


def test_generated_images_have_their_size_and_are_distinct_across_requests_and_streams_yet_repeat():
    config = ImagesConfig(count=2, width_px=40, height_px=24, seed=3)
    first, second = request_images(config, 0, 3), request_images(config, 1, 3)
    urls = [image.data_url for request in first + second for image in request]
    assert len(set(urls)) == 12  # no server cache of image features answers one request from another
    assert request_images(config, 0, 3) == first  # the same sweep sends the same images
    kind, image = decoded(first[0][0].data_url)
    assert kind == "data:image/jpeg;base64" and image.format == "JPEG" and image.size == (40, 24)
    assert (first[0][0].width_px, first[0][0].height_px) == (40, 24)
    png = request_images(ImagesConfig(width_px=16, format="png"), 0, 1)[0][0]
    kind, image = decoded(png.data_url)
    assert kind == "data:image/png;base64" and image.size == (16, 16)  # height_px defaults to width_px


def test_files_are_sent_as_they_are_in_turn(tmp_path):
    paths = []
    for i, size in enumerate([(30, 20), (10, 50), (8, 8)]):
        paths.append(str(tmp_path / f"{i}.png"))
        PILImage.new("RGB", size, (i, 0, 0)).save(paths[-1])
    sent = request_images(ImagesConfig(count=2, files=paths), 0, 2)
    assert [[(image.width_px, image.height_px) for image in request] for request in sent] == \
        [[(30, 20), (10, 50)], [(8, 8), (30, 20)]]
    assert sent[0][0].data_url == "data:image/png;base64," + base64.b64encode(open(paths[0], "rb").read()).decode()


@pytest.mark.parametrize("content,message", [
    (b"not an image\n", "'{path}' is not an image (in none of the formats PIL reads)"),
    (None, "'{path}' is not a whole image (image file is truncated"),
])
def test_a_file_that_is_not_a_whole_image_is_one_line(tmp_path, content, message):
    path = tmp_path / "bad.png"
    if content is None:  # a PNG cut short, as a copy interrupted leaves it
        PILImage.new("RGB", (64, 64)).save(path)
        content = path.read_bytes()[:-40]
    path.write_bytes(content)
    with pytest.raises(UserError) as error:
        read_image_file(str(path), "backends[0].images.files[0]")
    assert str(error.value).startswith("backends[0].images.files[0]: " + message.format(path=path))


def chats(n: int) -> StreamSpec:
    messages = tuple((("system", "Be brief."), ("user", f"question {i}")) for i in range(n))
    return StreamSpec(BatchSpec([[5, 6]] * n, (4,) * n, messages=messages), (0.0,) * n)


def test_a_chat_request_carries_its_images_before_the_text_of_its_last_user_message():
    client = CompletionsClient("http://127.0.0.1:9", "m", {}, 10.0, False, {}, "chat", "transformers",
                               images=ImagesConfig(count=2, width_px=8))
    bodies = [json.loads(body) for body in client.request_bodies(chats(2))]
    system, user = bodies[1]["messages"]
    assert system == {"role": "system", "content": "Be brief."}
    assert [part["type"] for part in user["content"]] == ["image_url", "image_url", "text"]
    assert user["content"][2]["text"] == "question 1"
    assert user["content"][0]["image_url"]["url"] == client._images[1][0].data_url
    again = [json.loads(body) for body in client.request_bodies(chats(2))]  # the next stream: images of its own
    assert again[1]["messages"][1]["content"][0] != user["content"][0]
    plain = CompletionsClient("http://127.0.0.1:9", "m", {}, 10.0, False, {}, "chat", "transformers")
    assert json.loads(plain.request_bodies(chats(1))[0])["messages"][1]["content"] == "question 0"


def test_an_image_text_model_is_built_whole_and_only_a_server_entry_serves_it():
    assert LLAVA.takes_images and not resolve_model(ModelConfig(preset="tiny-llama")).takes_images
    text = LLAVA.config.text_config
    assert LLAVA.max_positions == text.max_position_embeddings
    language_model = 2 * text.vocab_size * text.hidden_size  # the tower and projector come on top
    assert language_model < LLAVA.num_params < 2 * language_model
    why = HFBackend.unsupported(HFOptions(name="hf"), "batch", LLAVA)
    assert why == ("hf runs text-only models in the harness, and tiny-llava-next (model_type llava_next) takes images: "
                   "serve it with an openai entry (transformers serve)")
    assert OpenAIBackend.unsupported(OpenAIOptions(name="openai", base_url="http://127.0.0.1:9"), "stream",
                                     LLAVA) is None


def test_a_point_reports_the_images_its_requests_carried():
    def done(i, images):
        return RequestTiming(i, i * 0.1, i * 0.1, i * 0.1, i * 0.1 + 0.05, i * 0.1 + 0.08, input_tokens=100,
                             output_tokens=4, token_gaps_s=(0.01,) * 3, images=images)

    slo = SLO(ttft_ms=100, tpot_ms=50, percentile=90)
    timing = StreamTiming(0.0, 0.5, (done(0, ((56, 56),)), done(1, ((112, 56), (56, 56))), done(2, ())))
    row = summarize_stream(timing, slo)
    assert row["images_per_request"] == 1.5  # over the requests that carried any
    assert row["image_pixels_mean"] == pytest.approx((3136 + 6272 + 3136) / 3)
    assert "images_per_request" not in summarize_stream(StreamTiming(0.0, 0.5, (done(0, ()),)), slo)
