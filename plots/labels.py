"""Batch-size labels next to points that never overlap each other, a marker or a line.

Each label tries a ring of positions around its point, nearest first, and takes the first one
that is free; a label with no free position is left out rather than drawn over another (the
batch size is still readable from the order of points along the curve).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox

LABEL_FONTSIZE = 9
# (dx, dy) in points, with the alignment that puts the text on that side of the point.
CANDIDATE_OFFSETS_PT: Tuple[Tuple[float, float, str, str], ...] = tuple(
    (dx * r, dy * r, ha, va)
    for r in (1.0, 1.8, 2.6)
    for dx, dy, ha, va in ((5, 5, "left", "bottom"), (5, -5, "left", "top"), (-5, 5, "right", "bottom"),
                           (-5, -5, "right", "top"), (0, 7, "center", "bottom"), (0, -7, "center", "top"),
                           (7, 0, "left", "center"), (-7, 0, "right", "center"))
)
LINE_SAMPLE_STEP_PX = 3.0


@dataclass(frozen=True)
class PointLabel:
    x: float
    y: float
    text: str
    color: object


def place_point_labels(ax: Axes, labels: Sequence[PointLabel]) -> List[Annotation]:
    """Annotate each point at its first free candidate position; returns the annotations drawn."""
    ax.figure.draw_without_rendering()  # final limits and transforms: positions are measured in pixels
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    obstacles = _obstacle_points_px(ax)
    taken: List[Bbox] = []
    drawn = []
    for label in labels:
        annotation = _first_free(ax, label, renderer, frame, obstacles, taken)
        if annotation is not None:
            drawn.append(annotation)
    return drawn


def _first_free(ax, label, renderer, frame, obstacles, taken):
    for dx, dy, ha, va in CANDIDATE_OFFSETS_PT:
        annotation = ax.annotate(label.text, (label.x, label.y), xytext=(dx, dy), textcoords="offset points",
                                 ha=ha, va=va, fontsize=LABEL_FONTSIZE, color=label.color, zorder=5)
        box = annotation.get_window_extent(renderer).padded(1.5)
        if _inside(box, frame) and not _hits(box, obstacles) and not any(box.overlaps(t) for t in taken):
            taken.append(box)
            return annotation
        annotation.remove()
    return None


def _inside(box: Bbox, frame: Bbox) -> bool:
    return frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1


def _hits(box: Bbox, points_px: np.ndarray) -> bool:
    if points_px.size == 0:
        return False
    x, y = points_px[:, 0], points_px[:, 1]
    return bool(np.any((x >= box.x0) & (x <= box.x1) & (y >= box.y0) & (y <= box.y1)))


def _obstacle_points_px(ax: Axes) -> np.ndarray:
    """Every line of the axes as pixel points: dense along segments, a small disc around each marker."""
    chunks = [np.empty((0, 2))]
    for line in ax.get_lines():
        xy = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        if len(xy):
            chunks += [_sample_segments(xy), _marker_discs(xy, line)]
    return np.vstack(chunks)


def _sample_segments(xy: np.ndarray) -> np.ndarray:
    samples = [xy]
    for start, end in zip(xy[:-1], xy[1:]):
        steps = max(int(np.hypot(*(end - start)) / LINE_SAMPLE_STEP_PX), 1)
        samples.append(start + np.outer(np.linspace(0, 1, steps + 1), end - start))
    return np.vstack(samples)


def _marker_discs(xy: np.ndarray, line: Line2D) -> np.ndarray:
    if line.get_marker() in (None, "None", "", " "):
        return np.empty((0, 2))
    radius_px = line.get_markersize() / 2 * line.figure.dpi / 72
    ring = [(np.cos(a) * radius_px, np.sin(a) * radius_px) for a in np.linspace(0, 2 * np.pi, 8, endpoint=False)]
    return np.vstack([xy + np.asarray(offset) for offset in ring])
