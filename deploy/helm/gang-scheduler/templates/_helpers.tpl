{{/* Names and labels shared by every object of the chart. */}}

{{- define "gang-scheduler.name" -}}
gang-scheduler
{{- end }}

{{/* Labels of every object: the deploy/ manifests' labels plus Helm's own. */}}
{{- define "gang-scheduler.labels" -}}
app.kubernetes.io/name: gang-scheduler
app.kubernetes.io/part-of: gang-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* What the Deployment, its PodDisruptionBudget and the Service select on. */}}
{{- define "gang-scheduler.selectorLabels" -}}
app.kubernetes.io/name: gang-scheduler
app.kubernetes.io/component: scheduler
{{- end }}

{{- define "gang-scheduler.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The config file: values.config plus the two fields the chart owns. */}}
{{- define "gang-scheduler.config" -}}
{{- if hasKey .Values.config "metricsBindAddress" }}
{{- fail "config.metricsBindAddress: set metrics.port instead (the probes and the Service use it)" }}
{{- end }}
{{- $le := .Values.config.leaderElection | default dict }}
{{- if hasKey $le "leaseNamespace" }}
{{- fail "config.leaderElection.leaseNamespace: the Lease lives in the release namespace, where the chart's Role grants access to it" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (eq (toString (dig "enabled" true $le)) "false") }}
{{- fail (printf "replicaCount: %d replicas need config.leaderElection.enabled: true (two schedulers without a Lease would bind the same capacity twice)" (int .Values.replicaCount)) }}
{{- end }}
{{- $owned := dict "metricsBindAddress" (printf "0.0.0.0:%d" (int .Values.metrics.port)) "leaderElection" (merge (dict "leaseNamespace" .Release.Namespace) $le) }}
{{- if .Values.webhook.enabled }}
{{- $_ := set $owned "webhook" (dict "enabled" true "bindAddress" (printf "0.0.0.0:%d" (int .Values.webhook.port))) }}
{{- end }}
{{- toYaml (merge $owned (omit .Values.config "leaderElection")) }}
{{- end }}
