"""The label/value rows ``explain`` prints, in one format for a gang's report and for a
workload's. It lives below both modules because ``explain`` imports ``explain_workload``
for a Job's, JobSet's or TrainJob's name, so neither may import the other for it."""


def row(label: str, value: object) -> str:
    """One aligned ``label  value`` line of a report."""
    return f"  {label:<12} {value}"
