"""The embedding rate a process reports: an earlier run's rate stands while this one warms up (its
first calls load the model and start small), then its own, measured over a window."""

from __future__ import annotations

import json

from memfs.index.embedding.backlog import RATE_KEY, WARM_UP_S, RateMeter


class _Meta:
    def __init__(self, rate: float | None = None) -> None:
        self.values: dict[str, str] = {}
        if rate is not None:
            self.values[RATE_KEY] = json.dumps({"rate": rate, "at": 0.0})

    def get_meta(self, key: str) -> str | None:
        return self.values.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self.values[key] = value


def test_a_remount_keeps_the_earlier_rate_while_it_warms_up() -> None:
    meta = _Meta(rate=276.0)
    meter = RateMeter(meta)
    meter.batch(20, 2.0)  # the first call: the model loading, 10/s
    meter.batch(100, 1.0)
    assert meter.rate == 276.0  # status said "52/s, about 30 min left" here before
    assert json.loads(meta.values[RATE_KEY])["rate"] == 276.0  # recorded again: something embeds
    meter.batch(300, WARM_UP_S)  # past the warm-up: this run's own rate, the slow first calls left out
    assert meter.rate == 60.0
    meter.batch(600, 2.0)
    assert meter.rate == (300 + 600) / (WARM_UP_S + 2.0)


def test_a_first_run_measures_from_its_first_call() -> None:
    meter = RateMeter(_Meta())
    meter.batch(50, 1.0)
    assert meter.rate == 50.0
