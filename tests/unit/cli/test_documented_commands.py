"""Every command the docs and ``--help`` print is run, or named with the test that runs it.

The extractor reads the code blocks (fenced, or indented four spaces) of every Markdown file
in git and the ``examples:`` section of every subcommand's ``--help``, and finds each command
line (``\\`` continuations joined, ``# comments`` dropped, ``&&`` chains split). Each command
must match a rule:

- ``Run``: run here, in-process, from the repository root: offline commands (simulate, policy
  validate, ``--help``, ``--version``). Bounded honestly: a simulation gets ``--limit 150``
  (the first 150 jobs of its trace) and ``--no-progress``, its ``--out`` goes to a temporary
  directory, and placeholders (``my-cluster.yaml``, ``C``, ``T``) become the shipped files
  the text means. ``packing`` gets one seed on one process and, unless the command names
  its ``--nodes``, every tenth node of the openb cluster (``PACKING_NODE_STRIDE``). Exit 0
  is required, and the described effect is checked where it is written (a report, a sweep
  table). A benchmark script runs as a subprocess, bounded the
  same way: ``--limit 150`` for replays, one seed and the first arrival rate for sweeps,
  a tenth of the nodes and bound pods for ``bench_first_bind``.
- ``Covered``: needs a cluster or a build; the named test runs it, and must still contain
  the given text (so renaming the command there, or deleting the test, fails here).

A command no rule matches fails the test, naming the file and line: a new documented
command needs a rule, which is to say a test.
"""

from __future__ import annotations

import argparse
import glob
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler.cli.main import SUBCOMMANDS, build_parser, main
from simulator.samples import sample_path

ROOT = Path(__file__).resolve().parents[3]
PROGRAMS = ("gang-scheduler", ".venv/bin/gang-scheduler", "kubectl", "helm", ".venv/bin/",
            "python", "GANG_SCHEDULER_")
SIM_LIMIT = "150"


@dataclass(frozen=True)
class Command:
    where: str  # file:line, or "gang-scheduler X --help"
    text: str


def _markdown_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    return [ROOT / f for f in listed if (ROOT / f).is_file()]


def _commands_in(lines: list[str], where: str, code: list[bool]) -> Iterator[Command]:
    i = 0
    while i < len(lines):
        line = lines[i].strip().removeprefix("$ ")
        start = i
        if code[i] and line.startswith(PROGRAMS):
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1].rstrip() + " " + lines[i].strip()
            text = re.sub(r"\s+#.*$", "", line)  # a trailing comment
            for part in text.split(" && "):
                yield Command(f"{where}:{start + 1}", part.strip())
        i += 1


def documented() -> list[Command]:
    out: list[Command] = []
    for path in _markdown_files():
        lines = path.read_text().splitlines()
        code, fence = [], False
        for line in lines:
            if line.strip().startswith("```"):
                fence = not fence
                code.append(False)
            else:
                code.append(fence or (line.startswith("    ")
                                      and not line.lstrip().startswith(("-", "*", "|"))))
        out += _commands_in(lines, str(path.relative_to(ROOT)), code)
    parser = build_parser()
    for name, sub in _subparsers(parser).items():
        text = sub.format_help()
        if "\nexamples:\n" not in text:
            continue
        section = text.split("\nexamples:\n", 1)[1]
        example_lines = []
        for ln in section.splitlines():
            if ln and not ln.startswith(" "):  # the next heading ("policies:")
                break
            if not ln.strip().startswith("#"):
                example_lines.append(ln)
        out += _commands_in(example_lines, f"gang-scheduler {name} --help",
                            [True] * len(example_lines))
    return out


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers, by name (argparse keeps them in its subparsers action)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


# Rules -----------------------------------------------------------------------------------
PLACEHOLDERS = {
    "my-cluster.yaml": "scheduler/examples/clusters/sim-two-pools.yaml",
    "my-queues.yaml": "simulator/samples/two_pools_queues.yaml",
    "my.yaml": "scheduler/examples/clusters/dev.yaml",
}
PLACEHOLDER_FLAGS = {("--cluster", "C"): "scheduler/examples/clusters/sim-small.yaml",
                     ("--trace", "T"): "philly-sample"}


@dataclass(frozen=True)
class Run:
    pattern: str
    #: A file the run must write into its --out directory (the described effect).
    writes: str = ""


@dataclass(frozen=True)
class Covered:
    pattern: str
    test: str  # path of the test (or CI script) that runs it
    marker: str  # text that test still contains


RULES: tuple[Run | Covered, ...] = (
    Run(r"^(\.venv/bin/)?gang-scheduler (\S+ )?--help$"),
    Run(r"^(\.venv/bin/)?gang-scheduler --version$"),
    Run(r"^(\.venv/bin/)?gang-scheduler policy validate "),
    # Sweeps on a Ray cluster need a Ray head: the e2e test starts one and runs both.
    Covered(r"^(\.venv/bin/)?gang-scheduler (simulate|packing) .*--ray-address ",
            "tests/e2e/test_ray_sweeps.py", '"--ray-address"'),
    Run(r"^(\.venv/bin/)?gang-scheduler simulate .*--sweep ", writes="sweep.csv"),
    Run(r"^(\.venv/bin/)?gang-scheduler simulate .*--checkpoint-sweep ",
        writes="checkpoint_sweep.csv"),
    Run(r"^(\.venv/bin/)?gang-scheduler simulate ", writes="report.html"),
    Run(r"^(\.venv/bin/)?gang-scheduler packing ", writes="packing.png"),
    Covered(r"^python3 -m venv \.venv$", ".ci/run", "python3 -m venv .venv"),
    Covered(r"^\.venv/bin/pip install -e '\.\[dev\]'$", ".ci/run", "pip install"),
    Covered(r"^\.venv/bin/pip install -e '\.\[dev,ray\]'$", ".ci/run", "'.[dev,ray]'"),
    Covered(r"^\.venv/bin/pytest( |$)", ".ci/run", ".venv/bin/pytest"),
    # Re-records the decision digests: run on purpose only (it rewrites plans.json); the
    # test replays exactly what it records.
    Covered(r"^\.venv/bin/python -m tests\.unit\.recorded\.record$",
            "tests/unit/test_decisions_unchanged.py", "record.RECORD"),
    # The flake check runs the whole suite 20 times (hours): its unit test runs its entry
    # point on what fails fast (flag errors, --resume of a count made at another commit).
    Covered(r"^\.venv/bin/python tests/flake_check\.py( |$)", "tests/unit/test_flake_check.py",
            "flake_check.main("),
    Covered(r"^GANG_SCHEDULER_KUBERNETES=1\.37 \.venv/bin/pytest ",
            "tests/e2e/test_native_gangs.py", "1.37"),
    # The Job-wide backoff's quarter hour runs on demand only (README, "Preemption and resume").
    Covered(r"^GANG_SCHEDULER_E2E_JOB_WIDE_BACKOFF=1 GANG_SCHEDULER_E2E_OPERATORS=0 "
            r"\.venv/bin/pytest tests/e2e/test_job_contention\.py",
            "tests/e2e/test_job_contention.py", "GANG_SCHEDULER_E2E_JOB_WIDE_BACKOFF"),
    # Re-writes the DRA fixtures from the dev cluster: on purpose only (tests/data/dra/README.md).
    Covered(r"^GANG_SCHEDULER_E2E_DRA_FIXTURES=1 \.venv/bin/pytest -m e2e "
            r"tests/e2e/test_dra_devcluster\.py", "tests/e2e/test_dra_devcluster.py",
            "GANG_SCHEDULER_E2E_DRA_FIXTURES"),
    Run(r"^\.venv/bin/python benchmarks/bench_sim\.py( |$)"),
    Run(r"^\.venv/bin/python benchmarks/bench_reservations\.py "),
    Run(r"^\.venv/bin/python benchmarks/bench_curves\.py( |$)"),
    Run(r"^\.venv/bin/python benchmarks/bench_fair_memory\.py$"),
    Run(r"^\.venv/bin/python benchmarks/bench_policies\.py "),
    Run(r"^\.venv/bin/python benchmarks/bench_first_bind\.py( |$)"),
    # Needs a running dev cluster's state directory: the e2e test runs it on the session's.
    Covered(r"^\.venv/bin/python benchmarks/bench_list_encoding\.py ",
            "tests/e2e/test_benchmarks_run.py", '"benchmarks/bench_list_encoding.py"'),
    *(Covered(rf"^\.venv/bin/python benchmarks/{name}\.py( |$)",
              "tests/e2e/test_benchmarks_run.py", f'"{name}.py"')
      for name in ("bench_versus", "bench_fair", "bench_stream", "bench_kai", "bench_soak",
                   "bench_scale")),
    Covered(r"^kubectl apply -k deploy/?$", "tests/e2e/test_deploy_support.py",
            '"apply", "-k", str(REPO / "deploy")'),
    Covered(r"^kubectl apply -k deploy/queues$", "tests/e2e/test_deploy_support.py",
            '"deploy" / "queues"'),
    Covered(r"^kubectl apply -k deploy/users$", "tests/e2e/test_explain_access.py",
            '"deploy" / "users"'),
    # The README's local control plane block, run line by line on a fresh dev cluster.
    Covered(r"^kubectl apply -f examples/pytorch-ddp-indexed-job\.yaml$",
            "tests/e2e/test_day_one.py", "readme_block(HEADING)"),
    # The README's "Under Kueue" block, run line by line on a fresh dev cluster with Kueue.
    Covered(r"^kubectl apply -f examples/kueue/(queues|job)\.yaml$",
            "tests/e2e/test_kueue_recipe.py", "run_block(HEADING)"),
    Covered(r"^kubectl get workloads\.kueue\.x-k8s\.io$", "tests/e2e/test_kueue_recipe.py",
            "run_block(HEADING)"),
    # The README's training-operator v1 block, on a fresh dev cluster with the operator.
    Covered(r"^kubectl apply -f examples/pytorchjob\.yaml$",
            "tests/e2e/test_pytorchjob_recipe.py", "run_block(HEADING)"),
    # The README's "With KubeRay" block, run line by line on a fresh dev cluster with KubeRay.
    Covered(r"^kubectl apply -f examples/kuberay/raycluster\.yaml$",
            "tests/e2e/test_kuberay_recipe.py", "run_block(HEADING)"),
    Covered(r"^kubectl -n team-a get rayclusters$", "tests/e2e/test_kuberay_recipe.py",
            "run_block(HEADING)"),
    Covered(r"^kubectl apply -f examples/dra-indexed-job\.yaml$",
            "tests/e2e/test_examples_apply.py", '"dra-indexed-job.yaml"'),
    Covered(r"^kubectl apply -k deploy/webhook$", "tests/e2e/test_deploy_install.py",
            '"deploy" / "webhook"'),
    Covered(r"^kubectl label namespace \S+ gangscheduler\.io/defaults=enabled$",
            "tests/e2e/test_webhook_admission.py", '"label", "namespace"'),
    Covered(r"^kubectl -n \S+ apply -f \S+\.yaml$", "tests/e2e/test_webhook_admission.py",
            '"apply", "-n"'),
    Covered(r"^kubectl apply -k deploy/monitoring$", "tests/e2e/test_deploy_install.py",
            "deploy/monitoring"),
    Covered(r"^kubectl -n gang-scheduler-system port-forward ", "tests/e2e/test_ops_metrics.py",
            "metrics_port"),
    Covered(r"^kubectl gang ", "tests/e2e/test_views.py", "kubectl-gang"),
    Covered(r"^helm install gang-scheduler deploy/helm/gang-scheduler ",
            "tests/e2e/test_helm_install.py", '"install", RELEASE, str(CHART)'),
    Covered(r"^helm upgrade gang-scheduler deploy/helm/gang-scheduler .*--set-json",
            "tests/unit/test_helm_chart.py", "checksum/config"),
    Covered(r"^(\.venv/bin/)?gang-scheduler dev-cluster (--kubernetes 1\.37 )?(up|down|build)",
            "tests/e2e/test_control_plane.py", '_cli(tmp_path, "up"'),
    Covered(r"^(\.venv/bin/)?gang-scheduler dev-cluster token ",
            "tests/e2e/test_deploy_support.py", "token"),
    Covered(r"^(\.venv/bin/)?gang-scheduler run ", "tests/e2e/live_process.py", '"run"'),
    Covered(r"^(\.venv/bin/)?gang-scheduler explain ", "tests/e2e/test_explain_access.py",
            '"explain"'),
    Covered(r"^(\.venv/bin/)?gang-scheduler (queues|gangs|top)( |$)",
            "tests/e2e/test_views.py", '"gangs"'),
    Covered(r"^(\.venv/bin/)?gang-scheduler demo( |$)", "tests/e2e/test_examples_demo.py",
            '"demo"'),
    # (Inside a training pod; the helper's own writes run against the real apiserver in
    # tests/e2e/test_resume.py.)
    Covered(r"^(\.venv/bin/)?gang-scheduler checkpoint mark( |$)",
            "tests/unit/kube/test_checkpoint.py", '"checkpoint", "mark"'),
    Covered(r"^python3 checkpoint\.py( |$)", "tests/unit/kube/test_checkpoint.py",
            '"checkpoint.py"'),
    # (Needs a running scheduler or Prometheus: the test serves both, the scheduler's real
    # endpoint over a ledger and a Prometheus stub.)
    Covered(r"^(\.venv/bin/)?gang-scheduler chargeback --(scheduler|prometheus) ",
            "tests/unit/cli/test_chargeback_cli.py", '"chargeback", "--scheduler"'),
)


def rule_of(command: Command) -> Run | Covered | None:
    return next((r for r in RULES if re.search(r.pattern, command.text)), None)


COMMANDS = documented()


def test_the_extractor_finds_the_documented_commands() -> None:
    """Not vacuous: the README's first commands and the --help examples are found."""
    texts = {c.text for c in COMMANDS}
    assert ".venv/bin/gang-scheduler simulate --out sim-out" in texts
    assert any(c.where.startswith("gang-scheduler simulate --help") for c in COMMANDS)
    assert len(COMMANDS) > 30


def test_every_documented_command_has_a_rule() -> None:
    missing = [f"{c.where}: {c.text}" for c in COMMANDS if rule_of(c) is None]
    assert not missing, "documented commands no test runs:\n" + "\n".join(missing)


@pytest.mark.parametrize("rule", [r for r in RULES if isinstance(r, Covered)],
                         ids=lambda r: r.pattern)
def test_a_covered_command_is_still_run_by_its_test(rule: Covered) -> None:
    assert rule.marker in (ROOT / rule.test).read_text(), (rule.test, rule.marker)
    assert any(rule_of(c) is rule for c in COMMANDS), f"no documented command uses {rule}"


def _argv(text: str, out: Path) -> list[str]:
    words = shlex.split(text)[1:]  # drop the program
    argv: list[str] = []
    for i, w in enumerate(words):
        prev = words[i - 1] if i else ""
        if prev == "--out":
            w = str(out)
        elif prev == "--chargeback":  # a file, beside --out (never in the repository)
            w = str(out.parent / w)
        w = PLACEHOLDERS.get(w, PLACEHOLDER_FLAGS.get((prev, w), w))
        argv += sorted(glob.glob(w, root_dir=ROOT)) if "*" in w else [w]
    if argv[:1] == ["simulate"] and "--help" not in argv:
        argv += ["--limit", SIM_LIMIT, "--no-progress"]
    if argv[:1] == ["packing"] and "--help" not in argv:  # one seed each, here
        argv += ["--seeds", "1", "--jobs", "1", "--no-progress"]
        if "--nodes" not in argv:
            argv += ["--nodes", str(_packing_nodes(out.parent))]
    return argv


#: ``packing`` here runs on every tenth node of the openb cluster. Why that bounds it: its pods
#: are drawn until they ask for 130% of the cluster's GPUs, so a tenth of the cluster is a
#: tenth of the pods, each choosing among a tenth of the nodes (the default sample and trace
#: took 30-36 s a command on the whole cluster); every tenth, not the first tenth, keeps the
#: GPU models in the cluster's mix, so each documented pod list still finds its models.
PACKING_NODE_STRIDE = 10


def _packing_nodes(into: Path) -> Path:
    """A node list of every ``PACKING_NODE_STRIDE``-th node of the shipped openb one."""
    header, *rows = sample_path("openb-nodes").read_text().splitlines()
    path = into / "openb-nodes-sampled.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *rows[::PACKING_NODE_STRIDE]]) + "\n")
    return path


RUNS = [(c, r) for c in COMMANDS if isinstance(r := rule_of(c), Run)]


BOUNDS = {"--seeds": lambda v: "1", "--rates": lambda v: v.split(",")[0],
          # bench_curves: its plot goes to the temporary directory, not over the committed one
          "--plot": lambda v: str(Path(tempfile.gettempdir()) / Path(v).name),
          # bench_first_bind: a canned apiserver's cluster, a tenth of the documented size
          "--bound": lambda v: str(max(1, int(v) // 10)),
          "--nodes": lambda v: str(max(1, int(v) // 10))}


def _run_script(text: str) -> None:
    words = shlex.split(text)
    argv = [BOUNDS.get(words[i - 1], lambda v: v)(w) if i else sys.executable
            for i, w in enumerate(words)]
    if argv[1].endswith(("bench_sim.py", "bench_policies.py")):
        argv += ["--limit", SIM_LIMIT]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900,
                          check=False)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), f"{argv} printed nothing"


@pytest.mark.parametrize(("command", "rule"), RUNS, ids=[f"{c.where}" for c, _ in RUNS])
def test_a_documented_offline_command_runs(command: Command, rule: Run, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    if command.text.startswith(".venv/bin/python "):
        _run_script(command.text)
        return
    argv = _argv(command.text, tmp_path / "out")
    try:
        code = main(argv)
    except SystemExit as exc:  # --help and --version exit through argparse
        code = int(exc.code or 0)
    assert code == 0, f"{command.where}: {command.text} -> {argv} exited {code}"
    if rule.writes and "--out" in argv:
        assert (tmp_path / "out" / rule.writes).is_file(), sorted(
            p.name for p in (tmp_path / "out").glob("*"))


def test_the_local_control_plane_block_installs_what_the_first_example_needs() -> None:
    """Issue 32: the block started a cluster and the scheduler, applied neither deploy/ (the
    PriorityClasses the examples name) nor deploy/queues, and the first example failed. In
    the block, each of these comes before the next (tests/e2e/test_day_one.py runs it)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("## A local control plane") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("## "))
    block = [c.text for c in COMMANDS if c.where.startswith("README.md:")
             and start < int(c.where.split(":")[1]) <= end]
    steps = ("gang-scheduler dev-cluster up", "kubectl apply -k deploy/",
             "kubectl apply -k deploy/queues", "gang-scheduler run ", "kubectl apply -f examples/",
             "gang-scheduler dev-cluster down")
    at = [next((i for i, text in enumerate(block) if text.startswith(step)), -1)
          for step in steps]
    assert -1 not in at and at == sorted(at), block


def test_every_subcommand_is_reachable() -> None:
    """``SUBCOMMANDS`` modules register at least one subcommand each (or the docs lie)."""
    assert len(_subparsers(build_parser())) >= len(SUBCOMMANDS)
