{{/*
The prefix of every name: the release name when it contains "sartor"
(`sartor` gives the names of manifests/), else RELEASE-sartor. Kept short
enough for "-webhook-server-cert" and a DNS label ("-webhook").
*/}}
{{- define "sartor.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains "sartor" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-sartor" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The webhook's Service (`sartor serve --webhook-service`). */}}
{{- define "sartor.serviceName" -}}
{{- include "sartor.fullname" . }}-webhook
{{- end -}}

{{/* The MutatingWebhookConfiguration. */}}
{{- define "sartor.mutatingName" -}}
{{- include "sartor.fullname" . }}-mutating
{{- end -}}

{{/* The ValidatingWebhookConfiguration. */}}
{{- define "sartor.validatingName" -}}
{{- include "sartor.fullname" . }}-validating
{{- end -}}

{{/* The Secret of the managed certificate (`sartor serve --cert-secret`). */}}
{{- define "sartor.certSecretName" -}}
{{- include "sartor.fullname" . }}-webhook-server-cert
{{- end -}}

{{/* The Secret cert-manager writes the serving certificate to. */}}
{{- define "sartor.certManagerSecretName" -}}
{{- include "sartor.fullname" . }}-webhook-tls
{{- end -}}

{{/* Whether the certificate is managed by sartor ("true" or ""); fails on an unknown mode. */}}
{{- define "sartor.managedCert" -}}
{{- $mode := .Values.certificate.mode -}}
{{- if eq $mode "managed" -}}
true
{{- else if ne $mode "certManager" -}}
{{- fail (printf "certificate.mode must be managed or certManager, not %q" $mode) -}}
{{- end -}}
{{- end -}}

{{/* Whether the replicas derive the mutating webhook's rules ("true" or ""); fails on an unknown mode. */}}
{{- define "sartor.derivedRules" -}}
{{- $mode := .Values.mutatingWebhook.rulesMode -}}
{{- if eq $mode "derived" -}}
true
{{- else if ne $mode "pinned" -}}
{{- fail (printf "mutatingWebhook.rulesMode must be derived or pinned, not %q" $mode) -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object: sartor's own, then Helm's. */}}
{{- define "sartor.labels" -}}
app.kubernetes.io/name: sartor
app.kubernetes.io/part-of: sartor
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
{{- end -}}

{{/* Labels that select the webhook's Pods (Deployment, Service, PDB). */}}
{{- define "sartor.selectorLabels" -}}
app.kubernetes.io/name: sartor
{{- end -}}

{{/* The namespaces never mutated: kube-system, the release namespace, exemptNamespaces. */}}
{{- define "sartor.exemptNamespaces" -}}
{{- concat (list "kube-system" .Release.Namespace) .Values.exemptNamespaces | uniq | toJson -}}
{{- end -}}
