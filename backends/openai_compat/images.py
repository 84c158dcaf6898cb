"""Images sent with the text (an `openai` entry's `images` section; docs/measurement.md, "Images with the text"):
generated ones of a stated size, or a user's files, as data URLs in each chat request's last user message.

Generated images are random pixels (as vLLM's and SGLang's random-image datasets draw them), seeded by the section's
seed, the stream and the request, so every image a sweep sends is distinct: a server that caches an image's
features (vLLM's multimodal processor cache) never answers a later point or request from an earlier one. They are
made and encoded before the stream's clock starts, like every request body.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from harness.errors import UserError
from harness.fields import opt
from harness.files import read_file

IMAGE_FORMATS = ("jpeg", "png")
# The formats a user's file may be in: what PIL reads and chat servers take as image/<format> data URLs.
FILE_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP")
MAX_IMAGES_PER_REQUEST = 16
MAX_SIDE_PX = 4096  # a 4096x4096 image is 48 MiB of pixels; every request's images are held in memory as it is sent
JPEG_QUALITY = 85


@dataclass
class ImagesConfig:
    """The images each request carries: `count` generated ones of `width_px` x `height_px`, or `files`."""

    count: int = opt(1, ge=1, le=MAX_IMAGES_PER_REQUEST, unit="images", help="Images per request, placed before "
                     "the text of its last user message.")
    width_px: Optional[int] = opt(None, ge=1, le=MAX_SIDE_PX, unit="pixels", help="Generated images' width (random "
                                  "pixels, a distinct image for every request). Exactly one of width_px and files.")
    height_px: Optional[int] = opt(None, ge=1, le=MAX_SIDE_PX, unit="pixels", help="Generated images' height; "
                                   "default: width_px (square). A grid over images.width_px makes the size a sweep "
                                   "axis.")
    format: str = opt("jpeg", help="Generated images' encoding: jpeg (quality 85, as photos are sent) | png.")
    files: Optional[List[str]] = opt(None, help="Image files (JPEG, PNG, WEBP, GIF, BMP), a relative path beside the "
                                     "YAML or from the working folder; request i's images are files i*count, "
                                     "i*count+1, ... in turn (wrapping round the list).")
    seed: int = opt(0, ge=0, le=2**31 - 1, help="Seeds the generated images' pixels.")

    def validate(self, key: str) -> None:
        if (self.width_px is None) == (self.files is None):
            raise UserError(f"{key}: set exactly one of {key}.width_px (generated images) and {key}.files")
        if self.files is not None:
            changed = "height_px" if self.height_px is not None else "format" if self.format != "jpeg" else None
            if changed is not None:
                raise UserError(f"{key}.{changed}: shapes generated images; {key}.files are sent as they are")
            if not self.files:
                raise UserError(f"{key}.files: must name at least one image file")
            for i, path in enumerate(self.files):
                read_image_file(path, f"{key}.files[{i}]")
        elif self.format not in IMAGE_FORMATS:
            raise UserError(f"{key}.format: {self.format!r} is not one of {', '.join(IMAGE_FORMATS)}")

    @property
    def size_px(self) -> Tuple[int, int]:
        """Generated images' (width, height)."""
        assert self.width_px is not None  # validate(): generated images have a width
        return self.width_px, self.height_px if self.height_px is not None else self.width_px


@dataclass(frozen=True)
class Image:
    """One image as a request carries it."""

    data_url: str = ""
    width_px: int = 0
    height_px: int = 0


def read_image_file(path: str, where: str) -> Image:
    """The file at `path` as an Image; UserError naming `where` when it is missing or not an image PIL reads in one
    of FILE_FORMATS (a text file, a truncated image)."""
    from PIL import Image as PILImage, UnidentifiedImageError

    if not Path(path).exists() and not Path(path).is_symlink():
        raise UserError(f"{where}: no such file {path!r}")
    if Path(path).is_dir():
        raise UserError(f"{where}: {path!r} is a folder, not an image file")
    try:
        data = read_file(Path(path), "image")
    except UserError as error:  # a folder, a broken link, a pipe
        raise UserError(f"{where}: {error}") from None
    try:
        with PILImage.open(io.BytesIO(data)) as image:
            image.load()  # decodes every pixel: a truncated file fails here, not at the server
            kind, size = image.format, image.size
    except UnidentifiedImageError:
        raise UserError(f"{where}: {path!r} is not an image (in none of the formats PIL reads)") from None
    except (OSError, SyntaxError, ValueError) as error:  # a truncated or damaged image
        raise UserError(f"{where}: {path!r} is not a whole image ({str(error).splitlines()[0]})") from None
    if kind not in FILE_FORMATS:
        raise UserError(f"{where}: {path!r} is a {kind} image; send one of {', '.join(FILE_FORMATS)}")
    return Image(_data_url(kind.lower(), data), *size)


def generated_image(config: ImagesConfig, stream: int, request: int, index: int) -> Image:
    """Image `index` of request `request` in the entry's stream number `stream`: random RGB pixels from a generator
    seeded by all four, so the same sweep sends the same images and no two of them are alike."""
    import numpy as np
    from PIL import Image as PILImage

    width, height = config.size_px
    rng = np.random.default_rng([config.seed, stream, request, index])
    image = PILImage.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8), "RGB")
    out = io.BytesIO()
    image.save(out, format=config.format.upper(), **({"quality": JPEG_QUALITY} if config.format == "jpeg" else {}))
    return Image(_data_url(config.format, out.getvalue()), width, height)


def request_images(config: ImagesConfig, stream: int, num_requests: int) -> List[Tuple[Image, ...]]:
    """Every request's images in a stream of `num_requests`."""
    if config.files is None:
        return [tuple(generated_image(config, stream, i, j) for j in range(config.count)) for i in range(num_requests)]
    files = [read_image_file(path, f"images.files[{k}]") for k, path in enumerate(config.files)]
    return [tuple(files[(i * config.count + j) % len(files)] for j in range(config.count))
            for i in range(num_requests)]


def with_images(content: str, images: Tuple[Image, ...]) -> list:
    """A chat message's content as parts: the images, then the text (OpenAI's image_url parts)."""
    return [*({"type": "image_url", "image_url": {"url": image.data_url}} for image in images),
            {"type": "text", "text": content}]


def _data_url(kind: str, data: bytes) -> str:
    return f"data:image/{kind};base64,{base64.b64encode(data).decode('ascii')}"
