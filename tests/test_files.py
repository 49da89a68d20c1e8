import threading

import pytest

from versatil.files import atomic_write


def test_writes_a_new_file_whole(tmp_path):
    target = tmp_path / "ceiling.json"
    atomic_write(target, lambda tmp: tmp.write_text("new"))
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["ceiling.json"]


def test_the_writer_gets_the_name_of_the_target_beside_it(tmp_path):
    target = tmp_path / "last.ckpt"
    seen = []
    atomic_write(target, lambda tmp: seen.append(tmp) or tmp.write_bytes(b"x"))
    assert seen[0].name == "last.ckpt"
    assert seen[0].parent.parent == tmp_path  # same directory, same file system
    assert seen[0].parent.name.startswith(".last.ckpt.")


def test_replaces_a_file(tmp_path):
    target = tmp_path / "bundle.tar"
    target.write_bytes(b"old")
    atomic_write(target, lambda tmp: tmp.write_bytes(b"new"))
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["bundle.tar"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    target = tmp_path / "marker"
    target.write_text("old")

    def half(tmp):
        tmp.write_text("half of the ne")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, half)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["marker"]


def test_a_failed_write_of_a_new_file_leaves_nothing(tmp_path):
    def half(tmp):
        tmp.write_text("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "new", half)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_rename_leaves_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "marker"
    target.write_text("old")

    def refuse(src, dst):
        raise PermissionError("no")

    monkeypatch.setattr("versatil.files.os.replace", refuse)
    with pytest.raises(PermissionError):
        atomic_write(target, lambda tmp: tmp.write_text("new"))
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["marker"]


def test_replaces_a_directory_whole(tmp_path):
    target = tmp_path / "tokenizer"

    def write(version):
        def writer(path):
            path.mkdir()
            (path / "vocab.txt").write_text(version)

        return writer

    atomic_write(target, write("one"))
    atomic_write(target, write("two"))
    assert sorted(p.name for p in target.iterdir()) == ["vocab.txt"]
    assert (target / "vocab.txt").read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["tokenizer"]  # no .tokenizer.old


def test_a_failed_directory_write_keeps_the_old_directory(tmp_path):
    target = tmp_path / "tokenizer"
    target.mkdir()
    (target / "vocab.txt").write_text("one")

    def half(path):
        path.mkdir()
        (path / "vocab.txt").write_text("tw")
        raise OSError("interrupted")

    with pytest.raises(OSError):
        atomic_write(target, half)
    assert (target / "vocab.txt").read_text() == "one"
    assert [p.name for p in tmp_path.iterdir()] == ["tokenizer"]


def test_concurrent_writers_each_write_whole(tmp_path):
    target = tmp_path / "shared"
    texts = [str(i) * 10_000 for i in range(8)]
    threads = [
        threading.Thread(target=atomic_write, args=(target, lambda tmp, t=t: tmp.write_text(t)))
        for t in texts
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert target.read_text() in texts
    assert [p.name for p in tmp_path.iterdir()] == ["shared"]
