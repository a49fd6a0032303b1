"""The worker GC settings: raised once per process, never lowered."""

from __future__ import annotations

import gc

from beamcrawl.core.runtime import gctune


def test_tune_raises_the_young_threshold_once_per_process():
    before = gc.get_threshold()
    try:
        gctune._tuned_pid = None
        gc.set_threshold(700, before[1], before[2])
        gctune.tune()
        assert gc.get_threshold() == (gctune.GEN0_THRESHOLD, before[1], before[2])
        assert gc.isenabled()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        gc.set_threshold(123_456, before[1], before[2])  # a higher setting is kept: tune is done
        gctune.tune()
        assert gc.get_threshold()[0] == 123_456
        gctune._tuned_pid = None
        gctune.tune()  # a new process (or a reset) never lowers a higher threshold
        assert gc.get_threshold()[0] == 123_456
    finally:
        gc.set_threshold(*before)
