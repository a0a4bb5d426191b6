{{/*
The labels the objects of deploy/kubernetes carry, and the DaemonSet's
selector. Fixed, not derived from the release: a DaemonSet's selector
cannot change, so a set installed with kustomize keeps its selector here.
*/}}
{{- define "gpuaffinity.selectorLabels" -}}
app.kubernetes.io/name: gpuaffinity
app.kubernetes.io/component: agent
{{- end }}

{{/*
Object labels: the selector labels and Helm's standard ones
(https://helm.sh/docs/chart_best_practices/labels/). The pod template
carries the selector labels only, so an upgrade of the chart alone does
not restart every agent.
*/}}
{{- define "gpuaffinity.labels" -}}
{{ include "gpuaffinity.selectorLabels" . }}
{{ include "gpuaffinity.helmLabels" . }}
{{- end }}

{{/*
Helm's standard labels, on top of the kustomize set's labels on every
object's metadata (never in a selector or a pod template).
*/}}
{{- define "gpuaffinity.helmLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
{{- end }}

{{/*
The fleet labeller's labels (deploy/kubernetes/fleet): those of its
objects, job template and pod template there, fixed like the agent's.
*/}}
{{- define "gpuaffinity.fleetSelectorLabels" -}}
app.kubernetes.io/name: gpuaffinity
app.kubernetes.io/component: fleet
{{- end }}

{{/*
The fleet labeller's object labels: its labels and Helm's standard ones.
The job and pod templates carry gpuaffinity.fleetSelectorLabels only.
*/}}
{{- define "gpuaffinity.fleetLabels" -}}
{{ include "gpuaffinity.fleetSelectorLabels" . }}
{{ include "gpuaffinity.helmLabels" . }}
{{- end }}

{{/*
The image of the agent and of the fleet labeller: one image, one tag.
*/}}
{{- define "gpuaffinity.image" -}}
{{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
Object labels merged with a map of extra labels (a monitor's `labels`
value); on a clash the extra label wins, and no key is written twice.
Call with (dict "root" $ "extra" .Values.x.labels).
*/}}
{{- define "gpuaffinity.labelsWith" -}}
{{- $labels := include "gpuaffinity.labels" .root | fromYaml -}}
{{- toYaml (merge (deepCopy (.extra | default dict)) $labels) -}}
{{- end }}
