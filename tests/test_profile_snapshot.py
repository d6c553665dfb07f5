"""The shipped profile library's snapshot (commmodel/io/profile_snapshot.py, issue 17) is current, and a
file is only ever taken from a snapshot while its bytes are those it recorded.

Run as a script to rewrite hardware_profiles/parsed.json after editing a shipped YAML file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from commmodel.io import profile_snapshot, profiles
from commmodel.io.profile_snapshot import SNAPSHOT_NAME, snapshot_text, snapshot_value


def test_the_shipped_snapshot_is_current():
    directory = profiles.profiles_dir()
    fresh = snapshot_text(directory, profiles.parse_profile_yaml)
    assert (directory / SNAPSHOT_NAME).read_text(encoding="utf-8") == fresh, (
        "hardware_profiles/parsed.json is stale: run `python tests/test_profile_snapshot.py`")


def test_every_shipped_file_is_in_the_snapshot_and_reads_as_its_yaml():
    directory = profiles.profiles_dir()
    files = sorted(directory.rglob("*.yaml"))
    assert len(files) > 20
    for path in files:
        value = snapshot_value(path, directory)
        assert value is not None, path
        assert value == profiles.parse_profile_yaml(path), path
        assert json.dumps(value) == json.dumps(profiles.parse_profile_yaml(path)), path  # key order too


def _copy_with_snapshot(tmp_path: Path) -> Path:
    directory = tmp_path / "profiles"
    shutil.copytree(profiles.profiles_dir(), directory)
    (directory / SNAPSHOT_NAME).write_text(snapshot_text(directory, profiles.parse_profile_yaml), encoding="utf-8")
    profile_snapshot._entries.cache_clear()
    return directory


def test_an_edited_file_is_read_from_yaml_not_the_snapshot(tmp_path):
    directory = _copy_with_snapshot(tmp_path)
    path = directory / "systems" / "dgx-h100.yaml"
    assert snapshot_value(path, directory)["gpus_per_node"] == 8
    path.write_text(path.read_text(encoding="utf-8").replace("gpus_per_node: 8", "gpus_per_node: 4", 1),
                    encoding="utf-8")
    assert snapshot_value(path, directory) is None


def test_each_read_gives_fresh_objects(tmp_path):
    directory = _copy_with_snapshot(tmp_path)
    first = snapshot_value(directory / "links.yaml", directory)
    first.clear()
    assert snapshot_value(directory / "links.yaml", directory)


def test_a_value_json_cannot_carry_is_left_to_yaml(tmp_path):
    directory = tmp_path / "odd"
    directory.mkdir()
    (directory / "dates.yaml").write_text("when: 2024-01-02\n", encoding="utf-8")
    (directory / "keys.yaml").write_text("1: one\n", encoding="utf-8")
    (directory / "plain.yaml").write_text("a: [1, 2.0, true, null, '1e3']\n", encoding="utf-8")
    document = json.loads(snapshot_text(directory, profiles.parse_profile_yaml))
    assert sorted(document["files"]) == ["plain.yaml"]


def test_a_missing_or_broken_snapshot_means_yaml(tmp_path):
    directory = _copy_with_snapshot(tmp_path)
    (directory / SNAPSHOT_NAME).write_text("{not json", encoding="utf-8")
    profile_snapshot._entries.cache_clear()
    assert snapshot_value(directory / "links.yaml", directory) is None
    (directory / SNAPSHOT_NAME).unlink()
    profile_snapshot._entries.cache_clear()
    assert snapshot_value(directory / "links.yaml", directory) is None


if __name__ == "__main__":
    shipped = profiles.profiles_dir()
    (shipped / SNAPSHOT_NAME).write_text(snapshot_text(shipped, profiles.parse_profile_yaml), encoding="utf-8")
    print(f"wrote {shipped / SNAPSHOT_NAME}")
