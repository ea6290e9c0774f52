"""Small traces shipped with the package so `simulate` works out of the box.

Attribution and how each file was cut from its source: ``README.md`` in this directory.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: Short names accepted by `simulator.loaders.load_trace` -> file in this package.
SAMPLES = {
    "philly-sample": "philly_sample.csv",
    "openb-sample": "openb_pods_sample.csv",
    "synthetic-sample": "synthetic.yaml",
    "synthetic-two-pools-sample": "synthetic_two_pools.yaml",
    "synthetic-mixed-sample": "synthetic_mixed.yaml",
    "generic-sample": "generic_example.csv",
    # Names `simulate --help` once listed; still accepted.
    "synthetic": "synthetic.yaml",
    "generic-example": "generic_example.csv",
}
#: Cluster descriptions shipped next to the traces they were made for.
CLUSTERS = {"openb": "openb_cluster.yaml"}
#: Node lists (the packing experiment's clusters, ``gang-scheduler packing``).
NODE_LISTS = {"openb-nodes": "openb_nodes.csv"}


def sample_path(name: str) -> Path:
    """The path of a shipped sample by short name (``philly-sample``) or file name."""
    filename = SAMPLES.get(name, CLUSTERS.get(name, NODE_LISTS.get(name, name)))
    path = Path(str(resources.files(__package__).joinpath(filename)))
    if not path.is_file():
        known = ", ".join(sorted(SAMPLES) + sorted(CLUSTERS) + sorted(NODE_LISTS))
        raise FileNotFoundError(f"no shipped sample {name!r} (known: {known})")
    return path
