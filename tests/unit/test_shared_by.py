"""The filter preflight uses to refuse two inventory names for one machine, or one hostname for two."""

import pytest

from ansible_collections.hpcml.cluster.plugins.filter.shared_by import shared_by


@pytest.mark.parametrize(("values", "groups"), [
    ({"a": "m1", "b": "m2", "c": "m3"}, []),
    ({"b": "m1", "a": "m1", "c": "m2"}, [["a", "b"]]),
    ({"a": "m1", "b": "m2", "c": "m1", "d": "m2", "e": "m3"}, [["a", "c"], ["b", "d"]]),
    # Facts that could not be read are the same value, never taken as distinct machines.
    ({"a": None, "b": "", "c": "m1"}, [["a", "b"]]),
    ({}, []),
])
def test_names_sharing_a_value_are_grouped(values, groups):
    assert shared_by(values) == groups
