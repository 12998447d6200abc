"""The measuring scripts of issue #45 measure what they say: the small-file benchmark's notes are
daily logs of 1-10 KB each holding a word of their own, and the recall study's codecs keep what
the stored forms they stand for keep."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import bench_quant  # noqa: E402
import bench_smallfiles  # noqa: E402

from memfs.index.storage.vectors import pack_unit_vector, unpack_unit_vector  # noqa: E402
from memfs.workspace import FileKind, classify  # noqa: E402


def test_notes_are_daily_logs_of_1_to_10_kb_each_with_a_word_of_its_own(tmp_path: Path) -> None:
    names = bench_smallfiles.make_notes(tmp_path, 60, bench_smallfiles.DEV)
    assert len(names) == 60
    texts = {name: (tmp_path / name).read_text() for name, _ in names}
    for name, word in names:
        assert classify(f"memory/{name}") is FileKind.DAILY_LOG
        assert 1000 <= len(texts[name].encode()) <= 10 * 1024
        assert [n for n, text in texts.items() if word in text] == [name]


def _unit_rows(n: int, dims: int = 384, seed: int = 3) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, dims)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_int8_codec_is_what_units_keep() -> None:
    x = _unit_rows(5)
    decoded = bench_quant.int8_per_vector(x)
    for row, got in zip(x, decoded):
        assert np.array_equal(got, unpack_unit_vector(pack_unit_vector(row.tobytes()), 384))
    assert np.abs((decoded * x).sum(axis=1) - 1).max() < 0.01


def test_sqlite_vec_int8_is_its_global_scale() -> None:
    x = np.array([[-1, -0.5, -0.1, 0, 0.01, 0.1, 0.5, 0.99] * 48], dtype=np.float32)
    got = bench_quant.sqlite_vec_int8(x)[0]
    codes = np.array([-128, -64, -13, 0, 0, 12, 63, 125] * 48, dtype=np.float32)
    assert np.allclose(got, codes / np.linalg.norm(codes))


def test_truncation_keeps_the_first_dims_at_unit_length() -> None:
    x = _unit_rows(4)
    cut = bench_quant.truncated(256)(x)
    assert not cut[:, 256:].any()
    assert np.allclose(np.linalg.norm(cut, axis=1), 1, atol=1e-5)
    assert np.allclose(cut[:, :256] / np.linalg.norm(x[:, :256], axis=1, keepdims=True) ** -1, x[:, :256], atol=1e-5)
