"""The Kubernetes edge: the only package that talks to the apiserver (and imports ``kubernetes``).

- ``client``: raw-JSON requests and watch streams over one pooled ``ApiClient``
  (kubeconfig or in-cluster).
- ``convert``: pure apiserver JSON -> model functions; ``ConversionError`` names the field.
- ``informer``: list+watch per resource on raw JSON (bookmarks, 410 re-list, backoff).
- ``feed``: informers wired to the cluster cache, skipping malformed objects.
- ``binder``: whole-gang binds (a failure part-way keeps what is bound), pod deletion,
  evictions; ``rollback``: the bound members of a gang given up, released (DisruptionTarget,
  then deleted) and counted by cause.
- ``status`` / ``events``: pod conditions, nominated nodes, PodGroup status, rate-limited events.
"""
