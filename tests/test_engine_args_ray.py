"""A replica in a placement group of its own, on the session's local Ray cluster (2 CPUs).

The cluster has no GPU, so the bundles here are CPU ones; what is checked is the mechanism a
replica larger than one node relies on (gen/placement.py): each actor starts inside a fresh
placement group of the bundles asked for, and the tasks and actors it starts (vLLM's Ray
workers) are captured into that group.
"""

import json

import pyarrow as pa
import pytest

from reasonkit.ray_engine import run_shards, tag

pytestmark = pytest.mark.slow


class WhereAmI:
    """Returns, for its shard, the placement group it runs in and whether its children inherit it."""

    def __call__(self, batch: pa.Table) -> pa.Table:
        import ray
        from ray.util import get_current_placement_group

        group = get_current_placement_group()
        child = ray.get(ray.remote(num_cpus=0)(lambda: bool(get_current_placement_group())).remote())
        seen = {"bundles": group.bundle_specs if group else None, "child_in_group": child}
        shard = batch.column("shard")[0].as_py()
        return tag(pa.table({"seen": [json.dumps(seen)]}), shard)


def test_each_replica_runs_in_a_placement_group_of_the_bundles_asked_for(ray_cluster):
    seen = {}
    run_shards(
        [{"shard": 0}],
        {0: 1},
        WhereAmI,
        {},
        replicas=1,
        num_cpus=1,
        bundles=({"CPU": 1.0},),
        strategy="STRICT_PACK",
        on_shard=lambda shard, rows: seen.update(json.loads(rows.column("seen")[0].as_py())),
    )
    assert seen == {"bundles": [{"CPU": 1.0}], "child_in_group": True}
    _remove_placement_groups()


def _remove_placement_groups() -> None:
    """Free the groups this test made: the session's 2-CPU cluster outlives it, and a CPU bundle
    left reserved starves the Ray tests that follow (they waited forever in the full suite)."""
    import ray
    from ray.util import placement_group_table, remove_placement_group
    from ray.util.placement_group import PlacementGroup

    for group_id, info in placement_group_table().items():
        if info.get("state") != "REMOVED":
            remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(group_id))))
