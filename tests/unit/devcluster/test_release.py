"""Choosing the Kubernetes release the dev cluster builds and runs."""

from __future__ import annotations

import pytest

from scheduler.tools.devcluster import build, gates


def test_default_release_is_pinned_by_the_default_wrapper_module(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(build.RELEASE_ENV, raising=False)
    assert build.release() == build.DEFAULT_RELEASE
    assert build.KUBE_APISERVER.source_dir == build.RELEASES[build.DEFAULT_RELEASE]
    assert gates.minor(build.KUBE_APISERVER.version) == build.DEFAULT_RELEASE


@pytest.mark.parametrize("release", sorted(build.RELEASES))
def test_each_release_pins_every_kubernetes_binary_at_its_own_version(
        monkeypatch: pytest.MonkeyPatch, release: str) -> None:
    monkeypatch.setenv(build.RELEASE_ENV, release)
    kube = [c for c in build.COMPONENTS if c.follows_release]
    assert {c.name for c in kube} == {"kube-apiserver", "kube-controller-manager",
                                      "kube-scheduler", "kubectl"}
    assert {gates.minor(c.version) for c in kube} == {release}
    assert build.ETCD.source_dir == build.ETCD.module_dir  # etcd is shared
    for c in kube:  # every component has the gates its release needs
        if c is not build.KUBECTL:
            assert gates.feature_gates_flag(c.name, c.version)


def test_an_unknown_release_names_the_variable_and_the_known_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(build.RELEASE_ENV, "1.99")
    with pytest.raises(build.BuildError, match=r"GANG_SCHEDULER_KUBERNETES='1.99'.*1\.36, 1\.37"):
        _ = build.KUBE_APISERVER.version
