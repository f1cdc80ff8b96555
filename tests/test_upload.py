"""Uploads: Q/K saved from a toy spec come back as the same matrices; bad files get their message."""
from __future__ import annotations

import io
import pickle

import numpy as np
import pytest
import torch

from attention.analysis import frames

from attention.files import upload
from attention.analysis import analyze, analyze_qkv
from attention.spec import AttentionSpec

SPEC = AttentionSpec(tokens=("the", "cat", "sat", "on", "the", "mat"), d_model=32, d_k=8,
                     heads=3, seed=5)


def npy(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=True)
    return buf.getvalue()


def key_of(call) -> str:
    with pytest.raises(upload.UploadError) as err:
        call()
    return err.value.key


def test_qk_saved_from_a_toy_spec_give_the_same_matrices():
    ref = analyze(SPEC)
    q = upload.read_file("q.npy", upload.to_npy(ref.q))
    k = upload.read_file("k.npy", upload.to_npy(ref.k))
    v = upload.read_file("v.npy", upload.to_npy(ref.v))
    q_t, k_t, v_t = upload.qkv(q, k, v)
    assert torch.equal(q_t, ref.q) and torch.equal(k_t, ref.k) and torch.equal(v_t, ref.v)
    tokens = upload.resolve_tokens(6, "", [q, k, v], SPEC.tokens)
    got = analyze_qkv(SPEC, tokens, q_t, k_t, v_t)
    assert got.tokens == SPEC.tokens
    # The same Q, K, V (bit for bit, checked above) in new tensors: attention is recomputed, and
    # a CPU's matmul kernels may round differently for other memory: equal within a few ulps.
    same = dict(atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.scaled.weights, ref.scaled.weights, **same)
    torch.testing.assert_close(got.unscaled.weights, ref.unscaled.weights, **same)
    torch.testing.assert_close(got.scaled.output, ref.scaled.output, **same)


def test_one_head_as_csv_round_trips_with_its_tokens():
    ref = analyze(SPEC)
    q = upload.read_file("q.csv", upload.to_csv(ref.q[1], SPEC.tokens))
    k = upload.read_file("k.csv", upload.to_csv(ref.k[1], SPEC.tokens))
    assert q.tokens == SPEC.tokens and q.values.shape == (1, 6, 8)
    q_t, k_t, v_t = upload.qkv(q, k, None)
    assert v_t.shape == (1, 6, 1)
    got = analyze_qkv(SPEC, upload.resolve_tokens(6, "", [q, k], ("x",)), q_t, k_t, v_t)
    assert torch.allclose(got.scaled.weights[0], ref.scaled.weights[1], atol=1e-7)
    assert got.tokens == SPEC.tokens


def test_attention_matrix_upload():
    ref = analyze(SPEC)
    table = upload.read_file("w.npy", upload.to_npy(ref.scaled.weights))
    w = upload.attention_matrix(table)
    assert torch.equal(w, ref.scaled.weights)


def test_pickled_npy_is_refused():
    objects = np.array([{"a": 1}, [1, 2]], dtype=object)
    assert key_of(lambda: upload.read_file("q.npy", npy(objects))) == "model.upload_pickle"
    raw = pickle.dumps(torch.zeros(2, 2).numpy())         # a plain pickle named .npy
    assert key_of(lambda: upload.read_file("q.npy", raw)) == "model.upload_pickle"


def test_wrong_shapes_are_explained():
    q = upload.read_file("q.npy", npy(np.zeros((2, 5, 8), np.float32)))
    k = upload.read_file("k.npy", npy(np.zeros((2, 5, 4), np.float32)))
    with pytest.raises(upload.UploadError) as err:
        upload.qkv(q, k, None)
    assert err.value.key == "model.upload_qk_shape"
    assert "2 × 5 × 8" in str(err.value) and "2 × 5 × 4" in str(err.value)
    four_d = npy(np.zeros((1, 2, 3, 4)))
    assert key_of(lambda: upload.read_file("q.npy", four_d)) == "model.upload_ndim"
    v = upload.read_file("v.npy", npy(np.zeros((2, 4, 8))))
    assert key_of(lambda: upload.qkv(q, q, v)) == "model.upload_v_shape"
    rect = upload.read_file("w.npy", npy(np.full((3, 4), 0.25)))
    assert key_of(lambda: upload.attention_matrix(rect)) == "model.upload_not_square"


def test_text_cell_names_its_line_and_column():
    data = b"token,d0,d1\nthe,0.1,0.2\ncat,0.3,abc\n"
    with pytest.raises(upload.UploadError) as err:
        upload.read_file("q.csv", data)
    assert err.value.key == "model.upload_text_cell"
    assert err.value.values["line"] == 3 and err.value.values["column"] == 3
    assert "'abc'" in str(err.value)
    assert key_of(lambda: upload.read_file("q.csv", b"1,2\n3\n")) == "model.upload_ragged"


def test_rows_that_do_not_sum_to_one():
    w = np.full((2, 3, 3), 1 / 3)
    w[1, 2] = [0.5, 0.4, 0.0]
    table = upload.read_file("w.npy", npy(w))
    with pytest.raises(upload.UploadError) as err:
        upload.attention_matrix(table)
    assert err.value.key == "model.upload_row_sum"
    assert err.value.values["head"] == 1 and err.value.values["row"] == 2
    assert err.value.values["total"] == pytest.approx(0.9)
    neg = upload.read_file("w.npy", npy(np.array([[1.5, -0.5], [0.5, 0.5]])))
    assert key_of(lambda: upload.attention_matrix(neg)) == "model.upload_negative"


def test_limits_and_other_refusals():
    big = b"0" * (upload.MAX_BYTES + 1)
    assert key_of(lambda: upload.read_file("q.npy", big)) == "model.upload_too_big"
    assert key_of(lambda: upload.read_file("q.txt", b"1,2")) == "model.upload_extension"
    assert key_of(lambda: upload.read_file("q.npy", npy([[np.nan, 1.0]]))) == \
        "model.upload_not_finite"
    # Finite but huge: 1e39 is inf once cast to float32; 1e20 squares past float32's range.
    for huge in (1e39, -1e20):
        assert key_of(lambda: upload.read_file("q.npy", npy([[huge, 1.0]]))) == \
            "model.upload_huge_values"
    q = upload.read_file("q.npy", npy(np.full((1, 3, 1024), upload.MAX_ABS)))  # the bound: fine
    a = analyze_qkv(AttentionSpec(tokens=("a", "b", "c")), ("a", "b", "c"),
                    *upload.qkv(q, q, None))
    assert np.isfinite(frames.cells(a).select_dtypes("number").to_numpy()).all()
    assert key_of(lambda: upload.read_file("q.npy", npy(np.array(["a", "b"])))) == \
        "model.upload_npy_dtype"
    assert key_of(lambda: upload.read_file("q.npy", b"not a numpy file")) == "model.upload_bad_npy"
    assert key_of(lambda: upload.read_file("q.npy", npy(np.zeros((17, 2, 2))))) == \
        "model.upload_too_large"


def test_tokens_come_from_the_box_the_csv_or_the_sidebar():
    q = upload.read_file("q.npy", npy(np.zeros((3, 4))))
    assert upload.resolve_tokens(3, "a b c", [q], ("x",)) == ("a", "b", "c")
    assert upload.resolve_tokens(3, "", [q], ("x", "y", "z")) == ("x", "y", "z")
    with pytest.raises(upload.UploadError) as err:
        upload.resolve_tokens(3, "", [q], ("x",))
    assert err.value.key == "model.upload_tokens_count"
    assert "the sidebar" in str(err.value) and "3" in str(err.value)
