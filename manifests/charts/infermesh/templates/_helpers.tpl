{{/*
Labels of every object but the Namespace. The object names are fixed (not
derived from the release name): ClusterRoles and their bindings are
cluster-wide, so install one release per cluster.
*/}}
{{- define "infermesh.labels" -}}
app.kubernetes.io/name: pilot-discovery
app.kubernetes.io/part-of: infermesh
{{- end }}

{{/* The labels that select pilot-discovery's pods. */}}
{{- define "infermesh.selectorLabels" -}}
app.kubernetes.io/name: pilot-discovery
{{- end }}

{{/*
The container's environment beyond POD_NAMESPACE and GOMEMLIMIT: .Values.env,
plus what other values imply, unless .Values.env sets the same name. Sorted by
name.
*/}}
{{- define "infermesh.env" -}}
{{- $env := deepCopy .Values.env }}
{{- if and .Values.adsTLS.gatewayCA (not (hasKey $env "PILOT_GATEWAY_XDS_CA_FILE")) }}
{{- $_ := set $env "PILOT_GATEWAY_XDS_CA_FILE" "/etc/infermesh/ads-tls/ca.crt" }}
{{- end }}
{{- if and (not .Values.gatewayDeployments.enabled) (not (hasKey $env "PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER")) }}
{{- $_ := set $env "PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER" "false" }}
{{- end }}
{{- /* Gateway proxies dial the Service of the release namespace. */}}
{{- if and (ne .Release.Namespace "infermesh-system") (not (hasKey $env "PILOT_GATEWAY_XDS_ADDRESS")) }}
{{- $_ := set $env "PILOT_GATEWAY_XDS_ADDRESS" (printf "pilot-discovery.%s.svc:15010" .Release.Namespace) }}
{{- end }}
{{- range $name, $value := $env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}
