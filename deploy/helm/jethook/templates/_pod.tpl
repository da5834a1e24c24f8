{{/* The pod template of the Deployment and of the StatefulSet. */}}
{{- define "jethook.podTemplate" -}}
metadata:
  labels:
    {{- include "jethook.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # A new policies.yaml rolls the pods.
    checksum/policies: {{ .Values.policies | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  {{- with .Values.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: jethook
      image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["serve"]
      ports:
        - name: webhooks
          containerPort: 8080
        {{- if .Values.metrics.enabled }}
        - name: admin
          containerPort: {{ .Values.metrics.port }}
        {{- end }}
      env:
        - name: JETHOOK_LISTEN
          value: ":8080"
        - name: JETHOOK_CONFIG
          value: /etc/jethook/policies.yaml
        - name: JETHOOK_DATA_DIR
          value: /data
        {{- with .Values.nats.url }}
        - name: JETHOOK_NATS_URL
          value: {{ . | quote }}
        - name: JETHOOK_REPLICAS
          value: {{ $.Values.nats.replicas | quote }}
        {{- end }}
        {{- if .Values.metrics.enabled }}
        - name: JETHOOK_ADMIN_LISTEN
          value: {{ printf ":%v" .Values.metrics.port | quote }}
        {{- end }}
        {{- with .Values.adminToken.secretName }}
        - name: JETHOOK_ADMIN_TOKEN
          valueFrom:
            secretKeyRef: {name: {{ . | quote }}, key: {{ $.Values.adminToken.secretKey | quote }}}
        {{- end }}
        {{- range $name, $value := .Values.settings }}
        - name: {{ $name }}
          value: {{ $value | quote }}
        {{- end }}
        {{- with .Values.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.envFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: policies
          mountPath: /etc/jethook
          readOnly: true
        - name: data
          mountPath: /data
      # The admin listener may stay on the pod's loopback, which a
      # kubelet httpGet probe cannot reach, and the image has no shell:
      # `jethook probe` asks /readyz (ready) or /healthz (live) from
      # inside the container and exits 0 or 1.
      startupProbe:
        exec: {command: ["/usr/local/bin/jethook", "probe", "ready"]}
        periodSeconds: 2
        timeoutSeconds: 5
        failureThreshold: 60
      readinessProbe:
        # Not ready while the store takes no writes (ingress answers 503).
        exec: {command: ["/usr/local/bin/jethook", "probe", "ready"]}
        periodSeconds: 10
        timeoutSeconds: 5
      livenessProbe:
        # /healthz, not /readyz: a NATS outage must not restart pods.
        exec: {command: ["/usr/local/bin/jethook", "probe", "live"]}
        periodSeconds: 20
        timeoutSeconds: 5
        failureThreshold: 3
      {{- if .Values.preStopSeconds }}
      lifecycle:
        preStop:
          sleep: {seconds: {{ .Values.preStopSeconds }}}
      {{- end }}
      {{- with .Values.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- with .Values.extraContainers }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  volumes:
    - name: policies
      configMap:
        name: {{ include "jethook.fullname" . }}
    {{- if not (include "jethook.claimPerPod" .) }}
    - name: data
      {{- if and (include "jethook.embedded" .) .Values.persistence.enabled }}
      persistentVolumeClaim:
        claimName: {{ .Values.persistence.existingClaim | default (include "jethook.fullname" .) }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
