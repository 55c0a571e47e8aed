"""The merge policy: its settings checked when it is made, and read back from a manifest as written."""

from __future__ import annotations

import pytest

from retriever.errors import BadInputError
from retriever.storage.merging import MergePolicy


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("factor", 1),
        ("factor", 0),
        ("factor", 2.5),
        ("factor", True),
        ("floor_chunks", 0),
        ("small_factor", 1),
        ("max_commit_merge_chunks", -5),
        ("max_merge_chunks", "many"),
        ("max_deleted_share", 0),
        ("max_deleted_share", 1.5),
        ("max_deleted_share", float("nan")),
    ],
)
def test_a_setting_out_of_range_is_refused_by_name(setting, value):
    with pytest.raises(BadInputError, match=f"merge policy {setting} must be"):
        MergePolicy(**{setting: value})


def test_a_policy_reads_back_as_written_and_ignores_unknown_keys():
    policy = MergePolicy(factor=3, floor_chunks=10, small_factor=2, max_deleted_share=1.0)
    assert MergePolicy.from_dict(policy.to_dict() | {"added_later": 1}) == policy
    assert MergePolicy.from_dict(None) == MergePolicy()
