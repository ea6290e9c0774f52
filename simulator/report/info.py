"""What a report says about how it was produced, so a reader can reproduce it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunInfo:
    command: str  # the command line as typed
    seed: int | None = None
    trace: str = ""
    cluster: str = ""
    notes: tuple[str, ...] = ()  # modelling caveats, e.g. "3,078 shared GPUs rounded up to 1"
    title: str = "gang-scheduler capacity simulation"

    def to_dict(self) -> dict[str, object]:
        return {
            "title": self.title, "command": self.command, "seed": self.seed,
            "trace": self.trace, "cluster": self.cluster, "notes": list(self.notes),
        }
