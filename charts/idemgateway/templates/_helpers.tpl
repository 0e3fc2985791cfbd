{{/* The chart's name, or nameOverride. */}}
{{- define "idemgateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's objects: fullnameOverride, or release-chart (once). */}}
{{- define "idemgateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "idemgateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "idemgateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "idemgateway.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "idemgateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "idemgateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "idemgateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret that holds the admin token. */}}
{{- define "idemgateway.adminSecretName" -}}
{{- default (printf "%s-admin" (include "idemgateway.fullname" .)) .Values.admin.token.existingSecret }}
{{- end }}

{{/* The routes file: values.routes as YAML. */}}
{{/* The names the admin listener answers for besides IP addresses and localhost (docs/security.md#admin-listener): the Service's, and admin.hosts. */}}
{{- define "idemgateway.adminHosts" -}}
{{- $svc := include "idemgateway.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- concat $names (.Values.admin.hosts | default list) | join "," -}}
{{- end }}

{{- define "idemgateway.routesYAML" -}}
{{- toYaml .Values.routes }}
{{- end }}

{{/* true when the embedded store is used. */}}
{{- define "idemgateway.embedded" -}}
{{- if eq .Values.store.mode "embedded" }}true{{ end }}
{{- end }}

{{/* Fails the render on settings the process would refuse at start. */}}
{{- define "idemgateway.validate" -}}
{{- $r := .Values.store.redis }}
{{- if eq .Values.store.mode "redis" }}
{{- $hasURL := or $r.url $r.urlSecret.name }}
{{- if and $hasURL $r.addrs }}
{{- fail "store.redis: set url (or urlSecret) for one Redis, or addrs for Cluster or Sentinel, not both" }}
{{- end }}
{{- if not (or $hasURL $r.addrs) }}
{{- fail "store.mode redis needs store.redis.url, store.redis.urlSecret.name or store.redis.addrs" }}
{{- end }}
{{- if and $r.master (not $r.addrs) }}
{{- fail "store.redis.master needs the Sentinel addresses in store.redis.addrs" }}
{{- end }}
{{- end }}
{{- if and (eq .Values.store.mode "postgres") (not .Values.store.postgres.urlSecret.name) }}
{{- fail "store.mode postgres needs store.postgres.urlSecret.name: the Secret holding the connection URL" }}
{{- end }}
{{- end }}

{{/* The pod template of the Deployment and the StatefulSet. */}}
{{- define "idemgateway.podTemplate" -}}
{{- $r := .Values.store.redis }}
{{- $embedded := include "idemgateway.embedded" . -}}
metadata:
  labels:
    {{- include "idemgateway.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if or .Values.rollOnRoutesChange .Values.podAnnotations }}
  annotations:
    {{- if .Values.rollOnRoutesChange }}
    # A change of the routes rolls the pods.
    checksum/routes: {{ include "idemgateway.routesYAML" . | sha256sum }}
    {{- end }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
spec:
  serviceAccountName: {{ include "idemgateway.serviceAccountName" . }}
  automountServiceAccountToken: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  containers:
    - name: idemgateway
      image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: [serve]
      ports:
        - name: http
          containerPort: {{ .Values.proxy.port }}
          protocol: TCP
        - name: admin
          containerPort: {{ .Values.admin.port }}
          protocol: TCP
      env:
        - name: IDEMGATEWAY_ROUTES
          value: /etc/idemgateway/routes.yaml
        - name: IDEMGATEWAY_LISTEN
          value: {{ printf ":%v" .Values.proxy.port | quote }}
        - name: IDEMGATEWAY_ADMIN_LISTEN
          value: {{ printf ":%v" .Values.admin.port | quote }}
        - name: IDEMGATEWAY_ADMIN_HOSTS
          value: {{ include "idemgateway.adminHosts" . | quote }}
        - name: IDEMGATEWAY_ADMIN_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ include "idemgateway.adminSecretName" . }}
              key: {{ .Values.admin.token.key }}
        - name: IDEMGATEWAY_LOG_LEVEL
          value: {{ .Values.log.level | quote }}
        - name: IDEMGATEWAY_LOG_FORMAT
          value: {{ .Values.log.format | quote }}
        {{- if $embedded }}
        - name: IDEMGATEWAY_DATA_DIR
          value: /var/lib/idemgateway
        {{- else if eq .Values.store.mode "postgres" }}
        - name: IDEMGATEWAY_POSTGRES_URL
          valueFrom:
            secretKeyRef:
              name: {{ .Values.store.postgres.urlSecret.name }}
              key: {{ .Values.store.postgres.urlSecret.key }}
        - name: IDEMGATEWAY_POSTGRES_SCHEMA
          value: {{ .Values.store.postgres.schema | quote }}
        {{- else }}
        {{- if $r.urlSecret.name }}
        - name: IDEMGATEWAY_REDIS_URL
          valueFrom:
            secretKeyRef:
              name: {{ $r.urlSecret.name }}
              key: {{ $r.urlSecret.key }}
        {{- else if $r.url }}
        - name: IDEMGATEWAY_REDIS_URL
          value: {{ $r.url | quote }}
        {{- end }}
        {{- with $r.addrs }}
        - name: IDEMGATEWAY_REDIS_ADDRS
          value: {{ join "," . | quote }}
        {{- end }}
        {{- with $r.master }}
        - name: IDEMGATEWAY_REDIS_MASTER
          value: {{ . | quote }}
        {{- end }}
        {{- with $r.username }}
        - name: IDEMGATEWAY_REDIS_USERNAME
          value: {{ . | quote }}
        {{- end }}
        {{- with $r.sentinelUsername }}
        - name: IDEMGATEWAY_REDIS_SENTINEL_USERNAME
          value: {{ . | quote }}
        {{- end }}
        {{- if $r.passwordSecret.name }}
        - name: IDEMGATEWAY_REDIS_PASSWORD
          valueFrom:
            secretKeyRef:
              name: {{ $r.passwordSecret.name }}
              key: {{ $r.passwordSecret.key }}
        {{- end }}
        {{- if $r.sentinelPasswordSecret.name }}
        - name: IDEMGATEWAY_REDIS_SENTINEL_PASSWORD
          valueFrom:
            secretKeyRef:
              name: {{ $r.sentinelPasswordSecret.name }}
              key: {{ $r.sentinelPasswordSecret.key }}
        {{- end }}
        {{- if $r.tls }}
        - name: IDEMGATEWAY_REDIS_TLS
          value: "true"
        {{- end }}
        {{- if $r.caSecret.name }}
        - name: IDEMGATEWAY_REDIS_TLS_CA_FILE
          value: /etc/redis-ca/{{ $r.caSecret.key }}
        {{- end }}
        - name: IDEMGATEWAY_REDIS_POOL_SIZE
          value: {{ $r.poolSize | quote }}
        - name: IDEMGATEWAY_REDIS_DIAL_TIMEOUT
          value: {{ $r.dialTimeout | quote }}
        - name: IDEMGATEWAY_REDIS_READ_TIMEOUT
          value: {{ $r.readTimeout | quote }}
        - name: IDEMGATEWAY_REDIS_WRITE_TIMEOUT
          value: {{ $r.writeTimeout | quote }}
        - name: IDEMGATEWAY_REDIS_WAIT_REPLICAS
          value: {{ $r.waitReplicas | quote }}
        - name: IDEMGATEWAY_REDIS_WAIT_TIMEOUT
          value: {{ $r.waitTimeout | quote }}
        - name: IDEMGATEWAY_REDIS_ALLOW_EVICTION
          value: {{ $r.allowEviction | quote }}
        - name: IDEMGATEWAY_REDIS_AUTO_PIPELINE
          value: {{ $r.autoPipeline | quote }}
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.upstreamSecrets }}
      envFrom:
        {{- range . }}
        - secretRef:
            name: {{ . }}
        {{- end }}
      {{- end }}
      livenessProbe:
        {{- toYaml .Values.livenessProbe | nindent 8 }}
      readinessProbe:
        {{- toYaml .Values.readinessProbe | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        # A directory, not a subPath mount, so that the file follows ConfigMap updates.
        - name: routes
          mountPath: /etc/idemgateway
          readOnly: true
        {{- if $embedded }}
        - name: data
          mountPath: /var/lib/idemgateway
        {{- else if and (eq .Values.store.mode "redis") $r.caSecret.name }}
        - name: redis-ca
          mountPath: /etc/redis-ca
          readOnly: true
        {{- end }}
  volumes:
    - name: routes
      configMap:
        name: {{ include "idemgateway.fullname" . }}-routes
    {{- if and (eq .Values.store.mode "redis") $r.caSecret.name }}
    - name: redis-ca
      secret:
        secretName: {{ $r.caSecret.name }}
        items:
          - key: {{ $r.caSecret.key }}
            path: {{ $r.caSecret.key }}
    {{- end }}
  {{- if .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml .Values.topologySpreadConstraints | nindent 4 }}
  {{- else if .Values.topologySpread.enabled }}
  topologySpreadConstraints:
    - maxSkew: {{ .Values.topologySpread.maxSkew }}
      topologyKey: {{ .Values.topologySpread.topologyKey }}
      whenUnsatisfiable: {{ .Values.topologySpread.whenUnsatisfiable }}
      labelSelector:
        matchLabels:
          {{- include "idemgateway.selectorLabels" . | nindent 10 }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
