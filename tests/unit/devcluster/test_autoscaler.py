"""The dev cluster's cluster-autoscaler: its node groups declared from the cluster description
as its kwok provider reads them (and as gang-scheduler's scale-up feed reads the same
ConfigMap), and its build from a pinned source zip."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path
from typing import Any

import pytest

from scheduler.kube.read.node_groups import node_groups
from scheduler.tools.devcluster import autoscaler, build, nodes
from scheduler.world import clusterspec

SPEC = clusterspec.parse({"pools": [
    {"name": "a100", "count": 2, "gpusPerNode": 8, "gpuModel": "NVIDIA-A100-SXM4-80GB",
     "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}]})


def test_a_group_template_is_a_node_of_its_pool_with_the_providers_annotations() -> None:
    body = autoscaler.template(SPEC, autoscaler.NodeGroupSpec("a100", 8, 1))
    notes = body["metadata"]["annotations"]
    assert notes[autoscaler.GROUP_NAME_ANNOTATION] == "a100"
    assert (notes[autoscaler.MIN_COUNT_ANNOTATION], notes[autoscaler.MAX_COUNT_ANNOTATION]) \
        == ("1", "8")
    assert notes[nodes.KWOK_ANNOTATION] == nodes.KWOK_VALUE  # the dev cluster's kwok runs it
    labels = body["metadata"]["labels"]
    assert labels[SPEC.pool_label] == "a100"
    assert clusterspec.HOSTNAME_LABEL not in labels  # every node of the group would share it
    assert body["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert body["spec"]["taints"] == [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]


def test_the_scale_up_feed_reads_the_declared_group_as_the_provider_does() -> None:
    body = autoscaler.template(SPEC, autoscaler.NodeGroupSpec("a100", 8))
    (group,) = node_groups([body], [])
    assert (group.name, group.size, group.max_size, group.pool) == ("a100", 0, 8, "a100")
    config = autoscaler.provider_config()
    # (its error messages say "fromNodeAnnotation"; its code reads this key)
    assert config["nodegroups"] == {
        "fromNodeLabelAnnotation": autoscaler.GROUP_NAME_ANNOTATION}
    assert config["configmap"]["name"] == autoscaler.TEMPLATES_NAME
    assert config["nodes"]["skipTaint"] is True  # else no gang pod tolerates its nodes


@pytest.mark.parametrize(("text", "parsed"), [
    ("a100=8", autoscaler.NodeGroupSpec("a100", 8)),
    ("a100=2:8", autoscaler.NodeGroupSpec("a100", 8, 2)),
])
def test_autoscale_option_parses(text: str, parsed: autoscaler.NodeGroupSpec) -> None:
    assert autoscaler.NodeGroupSpec.parse(text) == parsed


@pytest.mark.parametrize("text", ["a100", "a100=", "=8", "a100=x", "a100=9:8", "a100=-1:8"])
def test_a_bad_autoscale_option_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"a100|POOL"):
        autoscaler.NodeGroupSpec.parse(text)


def test_a_group_of_a_pool_the_description_lacks_is_refused_naming_the_pools() -> None:
    with pytest.raises(ValueError, match=r"h100.*pools: a100"):
        autoscaler.template(SPEC, autoscaler.NodeGroupSpec("h100", 8))


def _zip(prefix: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        out.writestr(f"{prefix}go.mod", "module upstream\n")
        out.writestr(f"{prefix}main.go", "package main\n")
    return buffer.getvalue()


def _serve(monkeypatch: pytest.MonkeyPatch, payload: bytes) -> list[str]:
    asked: list[str] = []

    def urlopen(url: str, timeout: float) -> Any:
        asked.append(url)
        return io.BytesIO(payload)

    monkeypatch.setattr(build.urllib.request, "urlopen", urlopen)
    return asked


def _component(tmp_path: Path, payload: bytes,
               edits: tuple[tuple[str, str, str], ...] = ()) -> build.Component:
    overlay = tmp_path / "hack"
    overlay.mkdir()
    (overlay / "go.mod").write_text("module patched\n")
    (overlay / "go.sum").write_text("")
    source = build.ZipSource("example.com/m", hashlib.sha256(payload).hexdigest(), edits)
    return build.Component("m", overlay, "example.com/apis", ".", source_zip=source)


def test_the_source_zip_is_checked_unpacked_and_given_the_committed_go_mod(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = _zip("example.com/m@v1.0.0/")
    asked = _serve(monkeypatch, payload)
    monkeypatch.setenv("GOPROXY", "off,https://proxy.example/,direct")
    fix = ("main.go", "package main", "package main // fixed")
    root = build.unpack_source(_component(tmp_path, payload, (fix,)), "v1.0.0", tmp_path,
                               log=lambda line: None)
    assert asked == ["https://proxy.example/example.com/m/@v/v1.0.0.zip"]
    assert (root / "go.mod").read_text() == "module patched\n"
    assert (root / "main.go").read_text() == "package main // fixed\n"
    assert not (tmp_path / "source.zip").exists()


def test_a_source_zip_with_another_digest_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    component = _component(tmp_path, b"the pinned one")
    _serve(monkeypatch, _zip("example.com/m@v1.0.0/"))
    with pytest.raises(build.BuildError, match=r"sha256 .* expected"):
        build.unpack_source(component, "v1.0.0", tmp_path, log=lambda line: None)


def test_a_source_fix_that_no_longer_applies_fails_the_build_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = _zip("example.com/m@v1.0.0/")
    _serve(monkeypatch, payload)
    fix = ("main.go", "//go:build !gce", "//go:build !kwok && !gce")
    with pytest.raises(build.BuildError, match=r"fix of main\.go .* does not apply"):
        build.unpack_source(_component(tmp_path, payload, (fix,)), "v1.0.0", tmp_path,
                            log=lambda line: None)


def test_the_command_line_starts_with_the_binary_and_carries_the_limit_when_given() -> None:
    plain = autoscaler.argv(Path("/bin/ca"), Path("/kc"), 8085)
    limited = autoscaler.argv(Path("/bin/ca"), Path("/kc"), 8085, max_nodes_total=7)
    assert plain[0] == limited[0] == "/bin/ca"
    assert "--max-nodes-total=7" in limited and not any("max-nodes-total" in a for a in plain)
    # the ProvisioningRequest CRD has no protobuf encoding (see autoscaler.py)
    assert "--kube-api-content-type=application/json" in plain
    assert "--enable-provisioning-requests=true" in plain


def test_the_crd_the_cluster_installs_is_from_the_autoscalers_own_commit() -> None:
    assert build.AUTOSCALER_APIS.version == build.CLUSTER_AUTOSCALER.version
