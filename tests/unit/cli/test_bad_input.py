"""Bad input on the command line: exit non-zero with one line naming the file, field or flag.

Every case runs the real console-script entry point in-process, so an uncaught exception
(the traceback a user would see) fails the test. Nothing here starts a cluster or a scheduler:
each input is rejected before that.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.run import logconfig
from simulator import session

QUEUE = "apiVersion: gangscheduler.io/v1alpha1\nkind: Queue\nmetadata: {name: q}\n"
POLICY = "apiVersion: gangscheduler.io/v1alpha1\nkind: SchedulerPolicy\nmetadata: {name: p}\n"
GOOD_CLUSTER = "pools:\n  - {name: a100, count: 2}\n"
SYNTHETIC = ("format: synthetic\nseed: 1\njobs: 20\narrivals: {rate_per_hour: 10}\nteams: {q: 1}\n"
             "duration: {median: 600, sigma: 0.5, min: 60, max: 3600}\n")

#: name -> file contents written to tmp_path before the command runs (bytes for binary).
FILES: dict[str, str | bytes] = {
    "bad.yaml": "pools: [\n  - name: a\n",
    "empty.yaml": "",
    "list.yaml": "- a\n- b\n",
    "binary.yaml": b"\xff\xfe\x00garbage",
    "binary.csv": b"job_id,submit_time,duration\n\xff\xfe,0,1\n",
    "empty.csv": "",
    "afile": "x",
    "good.yaml": GOOD_CLUSTER,
    "cost-nan.yaml": "pools:\n  - {name: a100, count: 2, costPerGpuHour: .nan}\n",
    "count-neg.yaml": "pools:\n  - {name: a100, count: -3}\n",
    "q-nometa.yaml": "apiVersion: gangscheduler.io/v1alpha1\nkind: Queue\nspec: {weight: 1}\n",
    "q-metastr.yaml": "apiVersion: gangscheduler.io/v1alpha1\nkind: Queue\nmetadata: x\n",
    "q-huge.yaml": QUEUE + "spec: {quotas: [{pool: a100, nominal: {nvidia.com/gpu: 1e999}}]}\n",
    "q-nan.yaml": QUEUE + "spec: {weight: .nan}\n",
    "q-inf-runtime.yaml": QUEUE + "spec: {queueing: {defaultRuntimeSeconds: .inf}}\n",
    "sp-nan.yaml": POLICY + "spec: {reservation: {afterSeconds: .nan}}\n",
    "c-nan.yaml": "cycleIntervalSeconds: .nan\n",
    "c-zero.yaml": "cycleIntervalSeconds: 0\n",
    "c-loglevel.yaml": "logLevel: verbose\n",
    "c-logformat.yaml": "logFormat: xml\n",
    "c-addr.yaml": "metricsBindAddress: nonsense\n",
    "c-addr-digits.yaml": "metricsBindAddress: 'h:\u0668\u0660\u0668\u0660'\n",
    "c-bind0.yaml": "bindConcurrency: 0\n",
    "c-topo.yaml": "topologyLabels: ['a b']\n",
    "c-topo-dup.yaml": "topologyLabels: [a, b, a]\n",
    "cl-topo3.yaml": "topologyLabels: [z, b, r]\npools:\n  - {name: v100, count: 2}\n",
    "q-nopool.yaml": QUEUE + "spec: {quotas: [{pool: zz, nominal: {nvidia.com/gpu: 8}}]}\n",
    "q-somepool.yaml": QUEUE + "spec: {namespaces: [q], "
                               "quotas: [{pool: v100, nominal: {nvidia.com/gpu: 8}}, "
                               "{pool: zz, nominal: {nvidia.com/gpu: 8}}]}\n",
    "syn-pod.yaml": SYNTHETIC + "gang_gpus: {16: 1}\ngpus_per_worker: 16\n",
    "syn-some.yaml": SYNTHETIC + "gang_gpus: {8: 1, 512: 1}\ngpus_per_worker: 8\n",
    "syn.yaml": SYNTHETIC + "gang_gpus: {8: 1}\ngpus_per_worker: 8\n",
    "syn-two-teams.yaml": SYNTHETIC.replace("teams: {q: 1}", "teams: {q: 1, r: 1}")
                          + "gang_gpus: {8: 1}\ngpus_per_worker: 8\n",
    "q-v100.yaml": QUEUE + "spec: {namespaces: [q], quotas: [{pool: v100, nominal: "
                           "{nvidia.com/gpu: 8}}]}\n",
    "kc-bad.yaml": "apiVersion: v1\nkind: Config\nclusters: 5\n",
    "kc-unreachable.yaml": (
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: x}}]\n"),
}

SIM = ["simulate", "--no-progress", "--limit", "5", "--policy", "fifo-gang"]

# (id, argv, exit code, what stderr (or, for policy validate, stdout) must say)
CASES: list[tuple[str, list[str], int, str]] = [
    # simulate --cluster
    ("cluster missing", [*SIM, "--cluster", "nope.yaml"], 2,
     "nope.yaml: cannot read: No such file or directory"),
    ("cluster is a directory", [*SIM, "--cluster", "."], 2, ".: is a directory, expected a file"),
    ("cluster bad YAML", [*SIM, "--cluster", "bad.yaml"], 2,
     "bad.yaml: not valid YAML: line 2, column 3: expected the node content"),
    ("cluster not UTF-8", [*SIM, "--cluster", "binary.yaml"], 2,
     "binary.yaml: not UTF-8 text (byte 0xff at offset 0)"),
    ("cluster empty", [*SIM, "--cluster", "empty.yaml"], 2,
     "empty.yaml: <root>: empty document, expected a mapping with pools"),
    ("cluster negative count", [*SIM, "--cluster", "count-neg.yaml"], 2,
     "count-neg.yaml: pools[0].count: must be a positive integer, got -3"),
    ("cluster cost nan", [*SIM, "--cluster", "cost-nan.yaml"], 2,
     "pools[0].costPerGpuHour: must be a number >= 0, not nan or inf, got nan"),
    ("cluster 3 topology levels, outer one unset", [*SIM, "--cluster", "cl-topo3.yaml"], 2,
     "cl-topo3.yaml: pools[0].labels: must set z to a non-empty value: with 3 topologyLabels "
     "the outer 1 come from each pool's labels"),
    # simulate --queues
    ("queues bad YAML", [*SIM, "--queues", "bad.yaml"], 2, "bad.yaml: not valid YAML: line 2"),
    ("queues not UTF-8", [*SIM, "--queues", "binary.yaml"], 2, "binary.yaml: not UTF-8 text"),
    ("queues empty", [*SIM, "--queues", "empty.yaml"], 2,
     "empty.yaml: empty file, expected Queue or SchedulerPolicy objects"),
    ("queue quota overflows", [*SIM, "--queues", "q-huge.yaml"], 2,
     "spec.quotas[0].nominal.nvidia.com/gpu: too large"),
    ("queue weight nan", [*SIM, "--queues", "q-nan.yaml"], 2,
     "q: spec.weight: must be a finite number, got nan"),
    ("queue runtime inf", [*SIM, "--queues", "q-inf-runtime.yaml"], 2,
     "spec.queueing.defaultRuntimeSeconds: must be a finite number, got inf"),
    ("policy afterSeconds nan", [*SIM, "--queues", "sp-nan.yaml"], 2,
     "spec.reservation.afterSeconds: must be a finite number, got nan"),
    # a queue tree whose quotas name no pool of the cluster could never run a job
    # The trace's teams (the queues its jobs go to) are not in the --queues file: nothing runs.
    ("no job's queue in the file", [*SIM, "--queues", "q-v100.yaml"], 2,
     "q-v100.yaml: 5 of 5 jobs name queues it does not define, or define as a parent or for other "
     "namespaces ("),
    ("queue with no usable pool", [*SIM, "--queues", "q-nopool.yaml"], 2,
     "q-nopool.yaml: queue q: no usable pool: its quotas name only zz (the cluster's pools: "
     "v100), so its jobs could never run"),
    # simulate --trace
    ("trace is a directory", [*SIM, "--trace", "."], 2, ".: is a directory, expected a trace file"),
    ("trace empty", [*SIM, "--trace", "empty.csv"], 2,
     "empty.csv: empty file, expected a CSV header row"),
    ("trace not UTF-8", [*SIM, "--trace", "binary.csv"], 2, "binary.csv: not UTF-8 text"),
    ("synthetic spec bad YAML", [*SIM, "--trace", "bad.yaml"], 2,
     "bad.yaml: not valid YAML: line 2, column 3"),
    ("synthetic jobs none fit", [*SIM, "--trace", "syn-pod.yaml"], 2,
     "5 of 5 jobs can never fit this cluster: 5 need more GPUs per pod (16) than any node "
     "(of their GPU model) has (largest node: 8 GPUs); nothing to simulate"),
    # simulate flags
    ("sweep unknown pool", ["simulate", "--no-progress", "--limit", "5", "--sweep", "zz=1,2"], 2,
     "--sweep zz=...: unknown pool 'zz' (the cluster's pools: v100)"),
    ("sweep empty", ["simulate", "--sweep", ""], 2, "--sweep: expected POOL=N1,N2,..., got ''"),
    ("sweep not integers", ["simulate", "--sweep", "v100=a,b"], 2, "sizes must be integers"),
    # Digits other than ASCII's (int() and float() take them) are not numbers to any other
    # tool: refused like any other text (scheduler.model.numerals).
    ("sweep full-width sizes", ["simulate", "--sweep", "v100=\uff18"], 2,
     "--sweep v100: sizes must be integers, got '\uff18'"),
    ("checkpoint-sweep Arabic-Indic", [*SIM, "--mtbf", "v100=24", "--checkpoint-write", "60",
                                       "--checkpoint-sweep", "\u0666\u0660\u0660"], 2,
     "--checkpoint-sweep: intervals must be whole seconds, got '\u0666\u0660\u0660'"),
    ("mtbf Arabic-Indic hours", ["simulate", "--mtbf", "v100=\u0662\u0664"], 2,
     "--mtbf 'v100=\u0662\u0664': expected POOL=HOURS with HOURS a finite number > 0"),
    ("target-p95 without sweep", ["simulate", "--target-p95", "100"], 2,
     "--target-p95: only meaningful with --sweep"),
    ("mtbf nan", ["simulate", "--mtbf", "v100=nan"], 2,
     "--mtbf 'v100=nan': expected POOL=HOURS with HOURS a finite number > 0"),
    ("mtbf inf", ["simulate", "--mtbf", "v100=inf"], 2, "--mtbf 'v100=inf'"),
    ("mtbf garbage", ["simulate", "--mtbf", "garbage"], 2, "--mtbf 'garbage'"),
    ("mtbf unknown pool", [*SIM, "--mtbf", "zz=5"], 2, "--mtbf zz=...: unknown pool 'zz'"),
    ("out is a file", [*SIM, "--out", "afile"], 2, "--out afile: it exists and is not a directory"),
    ("out under a file", [*SIM, "--out", "afile/sub"], 2,
     "--out afile/sub: afile is a file, not a directory"),
    ("policy empty name", ["simulate", "--policy", ""], 2, "--policy: unknown ''"),
    # policy validate
    ("validate not UTF-8", ["policy", "validate", "binary.yaml"], 1,
     "binary.yaml: not UTF-8 text"),
    ("validate bad YAML", ["policy", "validate", "bad.yaml"], 1,
     "bad.yaml: not valid YAML: line 2, column 3"),
    ("validate directory", ["policy", "validate", "."], 1, ".: is a directory, expected a file"),
    ("validate empty", ["policy", "validate", "empty.yaml"], 1,
     "empty.yaml: empty file, expected Queue or SchedulerPolicy objects"),
    ("validate a YAML list", ["policy", "validate", "list.yaml"], 1,
     "<object #1>: must be a Queue or SchedulerPolicy object (a mapping), got list"),
    ("validate queue without metadata", ["policy", "validate", "q-nometa.yaml"], 1,
     "<Queue #1>: metadata.name: required"),
    ("validate metadata not a mapping", ["policy", "validate", "q-metastr.yaml"], 1,
     "<Queue #1>: metadata: must be a mapping, got str\n1 error(s)"),
    # explain
    ("explain empty namespace", ["explain", "/x"], 2, "'/x': expected NAMESPACE/NAME"),
    ("explain empty name", ["explain", "x/"], 2, "'x/': expected NAMESPACE/NAME"),
    ("explain two slashes", ["explain", "a/b/c"], 2, "'a/b/c': expected NAMESPACE/NAME"),
    ("explain no kubeconfig", ["explain", "a/b"], 2,
     "no kubeconfig found (no --kubeconfig, $KUBECONFIG is not set, no ~/.kube/config) and not "
     "running in a cluster"),
    ("explain $KUBECONFIG missing", ["explain", "a/b"], 2,
     "$KUBECONFIG nope.kubeconfig: no such file"),
    ("explain unknown context", ["explain", "a/b", "--kubeconfig", "kc-unreachable.yaml",
                                 "--context", "nope"], 2,
     "--kubeconfig kc-unreachable.yaml: no context 'nope'"),
    # the views take the same --kubeconfig and --context as explain
    ("gangs unknown context", ["gangs", "--kubeconfig", "kc-unreachable.yaml", "--context",
                               "nope"], 2, "--kubeconfig kc-unreachable.yaml: no context 'nope'"),
    ("queues $KUBECONFIG missing", ["queues"], 2, "$KUBECONFIG nope.kubeconfig: no such file"),
    ("top apiserver unreachable", ["top", "--iterations", "1", "--kubeconfig",
                                   "kc-unreachable.yaml"], 1,
     "cannot reach the apiserver at 127.0.0.1:1: [Errno 111] Connection refused"),
    ("explain kubeconfig missing", ["explain", "a/b", "--kubeconfig", "nope"], 2,
     "--kubeconfig nope: no such file"),
    ("explain kubeconfig directory", ["explain", "a/b", "--kubeconfig", "."], 2,
     "--kubeconfig .: is a directory, expected a file"),
    ("explain kubeconfig malformed", ["explain", "a/b", "--kubeconfig", "kc-bad.yaml"], 2,
     "--kubeconfig kc-bad.yaml: not a valid kubeconfig"),
    ("explain kubeconfig bad YAML", ["explain", "a/b", "--kubeconfig", "bad.yaml"], 2,
     "--kubeconfig bad.yaml: not valid YAML: line 2"),
    ("explain kubeconfig empty", ["explain", "a/b", "--kubeconfig", "empty.yaml"], 2,
     "--kubeconfig empty.yaml: not a usable kubeconfig"),
    ("explain apiserver unreachable", ["explain", "a/b", "--kubeconfig", "kc-unreachable.yaml"],
     1, "cannot reach the apiserver at 127.0.0.1:1: [Errno 111] Connection refused"),
    ("explain config not UTF-8", ["explain", "a/b", "--config", "binary.yaml"], 2,
     "--config binary.yaml: not UTF-8 text"),
    # run (each rejected before connecting)
    ("run config bad YAML", ["run", "--config", "bad.yaml"], 2,
     "--config bad.yaml: not valid YAML: line 2, column 3"),
    ("run config not UTF-8", ["run", "--config", "binary.yaml"], 2, "not UTF-8 text"),
    ("run config nan", ["run", "--config", "c-nan.yaml"], 2,
     "cycleIntervalSeconds: must be a finite number, got nan"),
    ("run config zero interval", ["run", "--config", "c-zero.yaml"], 2,
     "cycleIntervalSeconds: must be > 0, got 0"),
    ("run config log level", ["run", "--config", "c-loglevel.yaml"], 2,
     "logLevel: must be one of debug, info, warning, error, got 'verbose'"),
    ("run config log format", ["run", "--config", "c-logformat.yaml"], 2,
     "logFormat: must be one of auto, json, console, got 'xml'"),
    ("run config address", ["run", "--config", "c-addr.yaml"], 2,
     "metricsBindAddress: must be HOST:PORT (port 0-65535), got 'nonsense'"),
    ("run config zero binders", ["run", "--config", "c-bind0.yaml"], 2,
     "bindConcurrency: must be >= 1, got 0"),
    ("run config label key", ["run", "--config", "c-topo.yaml"], 2,
     "topologyLabels: not a valid label key: 'a b'"),
    ("run config duplicate level", ["run", "--config", "c-topo-dup.yaml"], 2,
     "topologyLabels: duplicate keys in ['a', 'b', 'a']"),
    ("run metrics address flag", ["run", "--metrics-address", "h:99999"], 2,
     "--metrics-address 'h:99999': expected HOST:PORT"),
    ("run webhook address flag", ["run", "--webhook-address", "9443"], 2,
     "--webhook-address '9443': expected HOST:PORT"),
    ("run gpu metrics url flag", ["run", "--gpu-metrics-url", "prom:9090"], 2,
     "--gpu-metrics-url gpuMetrics.prometheus: must be an http:// or https:// URL of "
     "Prometheus, got 'prom:9090'"),
    ("run metrics address Arabic-Indic port",
     ["run", "--metrics-address", "h:\u0668\u0660\u0668\u0660"], 2,
     "--metrics-address 'h:\u0668\u0660\u0668\u0660': expected HOST:PORT"),
    ("run config address Arabic-Indic port", ["run", "--config", "c-addr-digits.yaml"], 2,
     "c-addr-digits.yaml: metricsBindAddress: must be HOST:PORT (port 0-65535)"),
    ("run kubeconfig missing", ["run", "--kubeconfig", "nope"], 2,
     "--kubeconfig nope: no such file"),
    ("run kubeconfig malformed", ["run", "--kubeconfig", "kc-bad.yaml"], 2,
     "--kubeconfig kc-bad.yaml: not a valid kubeconfig"),
    ("run no kubeconfig", ["run"], 2, "no kubeconfig found (no --kubeconfig, $KUBECONFIG is not "
     "set, no ~/.kube/config) and not running in a cluster"),
    # dev-cluster and demo (rejected before anything starts)
    ("dev-cluster up bad YAML", ["dev-cluster", "up", "--cluster", "bad.yaml"], 2,
     "--cluster bad.yaml: not valid YAML: line 2, column 3"),
    ("dev-cluster up not UTF-8", ["dev-cluster", "up", "--cluster", "binary.yaml"], 2,
     "--cluster binary.yaml: not UTF-8 text"),
    ("dev-cluster up negative count", ["dev-cluster", "up", "--cluster", "count-neg.yaml"], 2,
     "--cluster count-neg.yaml: pools[0].count: must be a positive integer, got -3"),
    ("dev-cluster state dir is a file", ["dev-cluster", "--state-dir", "afile", "env"], 2,
     "--state-dir afile: it exists and is not a directory"),
    ("demo state dir is a file", ["demo", "--state-dir", "afile"], 2,
     "--state-dir afile: it exists and is not a directory"),
]

# (id, argv, the argparse message after "argument ")
FLAG_CASES: list[tuple[str, list[str], str]] = [
    ("time-scale 0", ["simulate", "--time-scale", "0"],
     "--time-scale: must be a finite number > 0, got '0'"),
    ("time-scale -1", ["simulate", "--time-scale", "-1"], "--time-scale: must be a finite"),
    ("time-scale nan", ["simulate", "--time-scale", "nan"], "--time-scale: must be a finite"),
    ("limit -5", ["simulate", "--limit", "-5"],
     "--limit: must be a whole number >= 1, got '-5'"),
    # No jobs: an empty table and exit 0 looked like a run that found nothing.
    ("limit 0", ["simulate", "--limit", "0"], "--limit: must be a whole number >= 1, got '0'"),
    ("limit full-width", ["simulate", "--limit", "\uff15"],
     "--limit: must be a whole number >= 1, got '\uff15'"),
    ("time-scale Arabic-Indic", ["simulate", "--time-scale", "\u0662"],
     "--time-scale: must be a finite number > 0, got '\u0662'"),
    # -1 stopped after one refresh: a silent reading of a bad value.
    ("top iterations -1", ["top", "--iterations", "-1"],
     "--iterations: must be a whole number >= 0, got '-1'"),
    ("price negative", ["simulate", "--price", "-3"],
     "--price: must be a finite number >= 0, got '-3'"),
    ("price inf", ["simulate", "--price", "inf"], "--price: must be a finite number >= 0"),
    ("target-p95 nan", ["simulate", "--target-p95", "nan"], "--target-p95: must be a finite"),
    ("checkpoint-interval 0", ["simulate", "--checkpoint-interval", "0"],
     "--checkpoint-interval: must be a finite number > 0"),
    ("checkpoint-write -1", ["simulate", "--checkpoint-write", "-1"],
     "--checkpoint-write: must be a finite number >= 0"),
    ("demo speed nan", ["demo", "--speed", "nan"], "--speed: must be a finite number > 0"),
    ("demo speed 0", ["demo", "--speed", "0"], "--speed: must be a finite number > 0"),
    ("demo timeout -1", ["demo", "--timeout", "-1"], "--timeout: must be a finite number > 0"),
    ("token duration", ["dev-cluster", "token", "-n", "a", "-s", "b", "--duration", "-5"],
     "--duration: must be a whole number >= 600, got '-5'"),
]


#: Environment variables a case of CASES runs with, by its id.
CASE_ENV: dict[str, dict[str, str]] = {
    "explain $KUBECONFIG missing": {"KUBECONFIG": "nope.kubeconfig"},
    "queues $KUBECONFIG missing": {"KUBECONFIG": "nope.kubeconfig"},
}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, content in FILES.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config of the machine's
    monkeypatch.setenv("COLUMNS", "400")  # rich wraps at the terminal width otherwise
    # explain and run point structlog at this test's captured stderr, which closes after it;
    # loggers cached on first use would then fail in later tests.
    monkeypatch.setattr(logconfig, "configure_logging", lambda *_a, **_k: None)
    return tmp_path


@pytest.mark.parametrize(("argv", "status", "says"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_error(
        workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest, argv: list[str], status: int, says: str) -> None:
    for name, value in CASE_ENV.get(request.node.callspec.id, {}).items():
        monkeypatch.setenv(name, value)
    assert main.main(argv) == status
    captured = capsys.readouterr()
    # policy validate reports on stdout (its errors are its output); the others on stderr
    shown = captured.out if argv[0] == "policy" else captured.err
    assert says in shown
    if argv[0] != "policy":
        assert shown.startswith("error: ") and shown.count("\n") == 1, shown


@pytest.mark.parametrize(("argv", "says"), [c[1:] for c in FLAG_CASES],
                         ids=[c[0] for c in FLAG_CASES])
def test_bad_flag_values_are_usage_errors(workdir: Path, capsys: pytest.CaptureFixture[str],
                                          argv: list[str], says: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main.main(argv)
    assert exited.value.code == 2
    assert f"error: argument {says}" in capsys.readouterr().err


# (id, argv, the one warning line) for input that is suspicious but still simulates: exit 0.
WARN_CASES: list[tuple[str, list[str], str]] = [
    # A capacity planner reuses one queue file across cluster variants: a quota for a pool
    # this cluster lacks is ignored with a warning (an error only when no pool is left, above).
    ("queue quota for a missing pool", [*SIM, "--queues", "q-somepool.yaml", "--trace",
                                        "syn.yaml"],
     "q-somepool.yaml: queue q: quota for pool 'zz' ignored, the cluster has no such pool "
     "(the cluster's pools: v100)"),
    # Jobs that can never fit are simulated (and reported as never started) like before, but
    # said up front; the rest of the trace still makes a meaningful simulation.
    # Jobs of a team the queue file does not define are simulated as never started: said first.
    ("some jobs' queue not in the file", [*SIM, "--queues", "q-v100.yaml", "--trace",
                                          "syn-two-teams.yaml"],
     "q-v100.yaml: 2 of 5 jobs name queues it does not define, or define as a parent or for other "
     "namespaces (r); its leaf queues: q. Name the queues after the trace's teams (with "
     "spec.namespaces listing the same name), or leave out --queues for one queue per team; "
     "those jobs will be reported as never started"),
    ("some synthetic jobs never fit", [*SIM, "--trace", "syn-some.yaml"],
     "3 of 5 jobs can never fit this cluster: 3 are gangs of more GPUs (512) than the cluster "
     "has for them (whole cluster: 192 GPUs); they will be reported as never started"),
]


@pytest.mark.parametrize(("argv", "says"), [c[1:] for c in WARN_CASES],
                         ids=[c[0] for c in WARN_CASES])
def test_suspicious_input_is_one_warning_and_still_runs(
        workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    """A quota naming a pool the cluster lacks: warn and run (a planner swaps clusters under
    one queue file); jobs that never fit: warn with counts and sizes, and simulate the rest."""
    assert main.main(argv) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert warnings == [f"warning: {says}"], err
    assert "Traceback" not in err


def _worker_raises(exc: BaseException) -> Callable[..., object]:
    def run(self: object, size: int) -> object:
        raise exc
    return run


def _worker_dies(self: object, size: int) -> object:
    os._exit(3)


ONE_CPU = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one CPU: sweeps run in-process")

# (sizes, what SizedRun does in the worker, what the error line says); 2 sizes run in worker
# processes (on 2+ CPUs), 1 size in-process.
SWEEP_FAILURES = [
    pytest.param("1", _worker_raises(ZeroDivisionError("division by zero")),
                 "sweep size 1 failed: ZeroDivisionError: division by zero",
                 id="in-process error"),
    pytest.param("1,2", _worker_raises(KeyError("v100")), "failed: KeyError: 'v100'",
                 id="worker process error"),
    pytest.param("1,2", _worker_dies, "failed: BrokenProcessPool: A process in the process "
                 "pool was terminated abruptly", id="worker process dies", marks=ONE_CPU),
]


@pytest.mark.parametrize(("sizes", "behaviour", "says"), SWEEP_FAILURES)
def test_sweep_worker_failure_is_one_line(
        workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        sizes: str, behaviour: Callable[..., object], says: str) -> None:
    """Worker processes are forked, so they run the patched ``SizedRun``."""
    monkeypatch.setattr(session.SizedRun, "__call__", behaviour)
    assert main.main([*SIM[:4], "--sweep", f"v100={sizes}"]) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and says in errors[0], err
    assert "Traceback" not in err
