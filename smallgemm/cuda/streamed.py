"""Runs the schedule of ``schedule``: panels copied in on two CUDA streams while kernels run.

Host panels go through page-locked (pinned) staging buffers, the only memory a copy
can overlap a kernel from.  Each device slot remembers which panel it holds and two
events: when its copy-in finished (a kernel on the other stream waits for it) and
when the last kernel that read it on each stream finished (a copy into the slot waits
for both).
Block b of C is computed on stream b % 2 in its C slot b % 2 (the one slot where C is
one block) and copied back on the same stream; the host moves it into the result while
block b + 1 runs.  The device arrays are ``schedule.device_bytes`` in all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from .kernels.ladder import LadderKernel
from .schedule import Panels, order, slots


@dataclass
class _Slot:
    """A device buffer for one panel, its pinned staging buffer, and its events."""

    device: object
    staging: np.ndarray
    loaded: object = field(default_factory=cuda.event)
    # One per stream: when the last kernel that read the slot on that stream finished.
    released: tuple = field(default_factory=lambda: (cuda.event(), cuda.event()))
    key: tuple | None = None
    last_use: int = -1


class _Panels:
    """The slots of one operand (``schedule.slots``), filled on demand, the least recently
    used refilled."""

    def __init__(self, source: np.ndarray, size: int, count: int) -> None:
        self.source = source
        self.slots = [
            _Slot(cuda.device_array(size, source.dtype), cuda.pinned_array(size, source.dtype))
            for _ in range(count)
        ]
        self.copies = 0

    def get(self, key: tuple, rows: slice, cols: slice, step: int, stream) -> tuple[_Slot, object]:
        """The slot holding panel ``source[rows, cols]`` (copied in on ``stream`` unless
        already there) and the panel as a 2-D device array."""
        view = self.source[rows, cols]
        count = view.size
        slot = next((s for s in self.slots if s.key == key), None)
        if slot is None:
            slot = min(self.slots, key=lambda s: s.last_use)
            slot.loaded.synchronize()  # its staging buffer's last copy-in has finished
            staging = slot.staging[:count].reshape(view.shape)
            np.copyto(staging, view)
            for released in slot.released:
                released.wait(stream)
            slot.device[:count].reshape(view.shape).copy_to_device(staging, stream=stream)
            slot.loaded.record(stream)
            slot.key = key
            self.copies += 1
        slot.last_use = step
        return slot, slot.device[:count].reshape(view.shape)


def run(kernel: LadderKernel, a: np.ndarray, b: np.ndarray, c: np.ndarray, panels: Panels) -> int:
    """``c[...] = a @ b`` on the device by ``panels``; returns the panels copied in."""
    m, k = a.shape
    n = b.shape[1]
    streams = (cuda.stream(), cuda.stream())
    a_count, b_count, c_count = slots(m, n, k, panels)
    a_panels = _Panels(a, panels.rows * panels.depth, a_count)
    b_panels = _Panels(b, panels.depth * panels.cols, b_count)
    size = panels.rows * panels.cols
    c_slots = [
        (cuda.device_array(size, c.dtype), cuda.pinned_array(size, c.dtype), cuda.event())
        for _ in range(c_count)
    ]
    pending = None  # (rows, cols, staging, event) of the block being copied back
    for number, step in enumerate(order(m, n, k, panels)):
        rows = slice(step.i * panels.rows, min(m, (step.i + 1) * panels.rows))
        cols = slice(step.j * panels.cols, min(n, (step.j + 1) * panels.cols))
        depth = slice(step.chunk * panels.depth, min(k, (step.chunk + 1) * panels.depth))
        lane = step.block % 2
        stream = streams[lane]
        a_slot, a_dev = a_panels.get((step.i, step.chunk), rows, depth, number, stream)
        b_slot, b_dev = b_panels.get((step.chunk, step.j), depth, cols, number, stream)
        c_dev, c_staging, c_done = c_slots[step.block % c_count]
        shape = (rows.stop - rows.start, cols.stop - cols.start)
        block = c_dev[: shape[0] * shape[1]].reshape(shape)
        a_slot.loaded.wait(stream)
        b_slot.loaded.wait(stream)
        kernel.launch(a_dev, b_dev, block, accumulate=step.chunk > 0, stream=stream)
        a_slot.released[lane].record(stream)
        b_slot.released[lane].record(stream)
        if depth.stop == k:  # the block is done: copy it back, and move the one before out
            staging = c_staging[: block.size].reshape(shape)
            block.copy_to_host(staging, stream=stream)
            c_done.record(stream)
            if pending is not None:
                _deliver(c, *pending)
            pending = (rows, cols, staging, c_done)
    if pending is not None:
        _deliver(c, *pending)
    return a_panels.copies + b_panels.copies


def _deliver(c: np.ndarray, rows: slice, cols: slice, staging: np.ndarray, done) -> None:
    done.synchronize()
    c[rows, cols] = staging
