"""bench.recall_latency refuses a bad ``--data`` or ``--out`` before it starts a server or builds
anything: a clear message and exit status 2, never a traceback (nor one after an hour's run), and
never a folder of someone else's opened to everyone (the embedded PostgreSQL's user must reach
the data folder: the servers open it, and as root every parent, to all)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from bench import recall_latency


@pytest.fixture(autouse=True)
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr(recall_latency, "run", refuse)


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        recall_latency.main(["--memories", "10000", "--queries", "20", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_a_data_folder_that_is_a_file_or_cannot_be_made_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x")
    assert "--data" in _refused(capsys, "--data", str(tmp_path / "file"))
    (tmp_path / "ro").mkdir(mode=0o500)
    if os.geteuid() != 0:  # root may write anywhere
        assert "--data" in _refused(capsys, "--data", str(tmp_path / "ro" / "store"))
    assert "--data" in _refused(capsys, "--data", "/proc/noema-bench-store")


def test_a_folder_of_other_files_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # e.g. --data /tmp or the checkout: the run would write its servers' files among the folder's
    # and open it (0755); /tmp would lose its sticky bit.
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    (shared / "someone-elses").write_text("x")
    assert "not empty" in _refused(capsys, "--data", str(shared))
    assert (shared.stat().st_mode & 0o7777) == 0o1777


def test_a_noema_data_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pg").mkdir()
    (tmp_path / "noema.json").write_text("{}")
    assert "noema.json" in _refused(capsys, "--data", str(tmp_path))


def test_a_folder_under_root_is_refused_when_running_as_root(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert "/root" in _refused(capsys, "--data", "/root/noema-bench-store")
    assert not Path("/root/noema-bench-store").exists()


def test_an_out_file_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "--out" in _refused(capsys, "--out", "/proc/noema-bench.json")
    assert "--out" in _refused(capsys, "--out", str(tmp_path))  # a folder


def test_a_new_an_empty_or_a_kept_folder_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[Path | None] = []

    async def fake_run(*args: object) -> dict[str, object]:
        taken.append(args[4])  # type: ignore[arg-type]
        return {}

    monkeypatch.setattr(recall_latency, "run", fake_run)
    base = ["--memories", "10000", "--queries", "20", "--data"]
    assert recall_latency.main([*base, str(tmp_path / "new" / "store")]) == 0
    (tmp_path / "empty").mkdir()
    assert recall_latency.main([*base, str(tmp_path / "empty")]) == 0
    kept = tmp_path / "kept"
    (kept / "pg").mkdir(parents=True)
    (kept / "nats.conf").write_text("")
    assert recall_latency.main([*base, str(kept)]) == 0
    assert taken == [tmp_path / "new" / "store", tmp_path / "empty", kept]


def test_an_unknown_kind_of_vectors_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--vectors" in _refused(capsys, "--vectors", "gaussian")


def test_e5_like_vectors_sit_in_the_model_s_narrow_cone_as_its_real_embeddings_do() -> None:
    # Random unit vectors are all but orthogonal; the model's embeddings of real conversations have a
    # mean pair cosine of 0.85 (passages), and questions lean toward them (bench/e5_moments.npz).
    rng = np.random.default_rng(3)
    for kind, low, high in (("random", -0.05, 0.05), ("e5", 0.75, 0.95)):
        passages = recall_latency._vectors(kind, rng, 400)
        queries = recall_latency._vectors(kind, rng, 100, "queries")
        assert passages.shape == (400, recall_latency.DIMS)
        assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
        pairs = (passages @ passages.T)[np.triu_indices(400, 1)]
        assert low < pairs.mean() < high, kind
        assert low - 0.1 < (queries @ passages.T).mean() < high, kind
