{{/* Names, labels and shared snippets. */}}

{{- define "sa.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sa.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "sa.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "sa.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sa.operatorName" -}}
{{- printf "%s-operator" (include "sa.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels every object carries. */}}
{{- define "sa.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "sa.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "sa.operatorSelector" -}}
app.kubernetes.io/name: {{ include "sa.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* The daemons' pods, as the operator labels them (autoscaler/operator/children.py). */}}
{{- define "sa.daemonSelector" -}}
app.kubernetes.io/name: spark-autoscaler
app.kubernetes.io/component: daemon
{{- end -}}

{{/* The executors' pods (the operator's executor pod template). */}}
{{- define "sa.executorSelector" -}}
spark-autoscaler.io/role: executor
{{- end -}}

{{- define "sa.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.image.registry -}}{{- $repo = printf "%s/%s" .Values.image.registry $repo -}}{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "sa.operatorServiceAccount" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (include "sa.operatorName" .) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sa.tokenSecret" -}}
{{- default .Values.controlToken.secretName .Values.controlToken.existingSecret -}}
{{- end -}}

{{- define "sa.leaseName" -}}
{{- default (include "sa.operatorName" .) .Values.operator.leaderElection.leaseName -}}
{{- end -}}

{{/* Seconds in a duration the schema accepted (1h30m, 1.5d, 250ms), read as the daemon's
parse_duration reads it: each number times its unit, summed. */}}
{{- define "sa.durationSeconds" -}}
{{- $unit := dict "d" 86400.0 "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9.]+(ms|d|h|m|s)" . -1 -}}
{{- $total = addf $total (mulf (regexFind "^[0-9.]+" . | float64) (get $unit (regexReplaceAll "^[0-9.]+" . ""))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* A quantity the schema accepted (500m, 0.5, 2, 128Mi, 1G, 1e3) as a number, to compare a
request with its limit as the API server does. A YAML number prints as 1e+06 when large: the
exponent form, which float64 reads whole. */}}
{{- define "sa.quantity" -}}
{{- $text := toString . | trimPrefix "+" -}}
{{- $suffix := regexReplaceAll "^([0-9]+[.]?[0-9]*|[.][0-9]+)" $text "" -}}
{{- $scale := dict "" 1.0 "n" 0.000000001 "u" 0.000001 "m" 0.001 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 "P" 1000000000000000.0 "E" 1000000000000000000.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- if hasKey $scale $suffix -}}
{{- mulf (trimSuffix $suffix $text | float64) (get $scale $suffix) -}}
{{- else -}}
{{- $text | float64 -}}
{{- end -}}
{{- end -}}

{{/* Checks JSON Schema cannot express, each failing with the value it names. */}}
{{- define "sa.checks" -}}
{{- /* the operator and the daemon refuse longer durations at start (autoscaler/core/settings.py
       MAX_DURATION): a crash loop, so refuse them here; a pattern cannot bound a sum */ -}}
{{- $durations := dict
      "operator.resyncInterval" .Values.operator.resyncInterval
      "operator.watchTimeout" .Values.operator.watchTimeout
      "operator.daemonTimeout" .Values.operator.daemonTimeout
      "operator.eventsRepeatInterval" .Values.operator.eventsRepeatInterval
      "appDefaults.requestTimeout" .Values.appDefaults.requestTimeout
      "appDefaults.resourceWaitTimeout" .Values.appDefaults.resourceWaitTimeout
      "metrics.serviceMonitor.interval" .Values.metrics.serviceMonitor.interval
      "metrics.serviceMonitor.scrapeTimeout" .Values.metrics.serviceMonitor.scrapeTimeout -}}
{{- range $key, $text := $durations -}}
{{- if gt (include "sa.durationSeconds" $text | float64) 315360000.0 -}}
{{- fail (printf "%s: duration must be at most 3650d (about ten years), got %q" $key $text) -}}
{{- end -}}
{{- end -}}
{{- /* the operator refuses a resync that spins and a daemon call that always times out
       (autoscaler/operator/settings.py MIN_RESYNC_INTERVAL, MIN_DAEMON_TIMEOUT): a crash loop */ -}}
{{- if lt (include "sa.durationSeconds" .Values.operator.resyncInterval | float64) 1.0 -}}
{{- fail (printf "operator.resyncInterval: must be at least 1s (less spins the resync loop), got %q" .Values.operator.resyncInterval) -}}
{{- end -}}
{{- if lt (include "sa.durationSeconds" .Values.operator.daemonTimeout | float64) 0.1 -}}
{{- fail (printf "operator.daemonTimeout: must be at least 100ms (a daemon's answer takes milliseconds), got %q" .Values.operator.daemonTimeout) -}}
{{- end -}}
{{- /* the operator's watch takes whole seconds (autoscaler/operator/settings.py MIN_WATCH_TIMEOUT):
       under 1 s it was sent as 0, the API server's own default; the operator refuses it at start */ -}}
{{- if lt (include "sa.durationSeconds" .Values.operator.watchTimeout | float64) 1.0 -}}
{{- fail (printf "operator.watchTimeout: must be at least 1s (the watch takes whole seconds), got %q" .Values.operator.watchTimeout) -}}
{{- end -}}
{{- /* both ServiceMonitors (templates/monitoring/servicemonitors.yaml) take these two, and
       Prometheus refuses a scrape_timeout greater than the scrape_interval: none is scraped */ -}}
{{- $sm := .Values.metrics.serviceMonitor -}}
{{- if and $sm.enabled (gt (include "sa.durationSeconds" $sm.scrapeTimeout | float64) (include "sa.durationSeconds" $sm.interval | float64)) -}}
{{- fail (printf "metrics.serviceMonitor.scrapeTimeout (%q) must not exceed metrics.serviceMonitor.interval (%q): Prometheus refuses a scrape timeout longer than the scrape interval" $sm.scrapeTimeout $sm.interval) -}}
{{- end -}}
{{- $le := .Values.operator.leaderElection -}}
{{- if and $le.enabled (le (int $le.leaseDuration) (int $le.renewDeadline)) -}}
{{- fail (printf "operator.leaderElection: leaseDuration (%v) must exceed renewDeadline (%v)" $le.leaseDuration $le.renewDeadline) -}}
{{- end -}}
{{- if and $le.enabled (le (mulf $le.renewDeadline 1.0) (mulf $le.retryPeriod 1.2)) -}}
{{- fail (printf "operator.leaderElection: renewDeadline (%v) must exceed 1.2 x retryPeriod (%v)" $le.renewDeadline $le.retryPeriod) -}}
{{- end -}}
{{- if and (gt (int .Values.operator.replicas) 1) (not $le.enabled) -}}
{{- fail (printf "operator.replicas is %v but operator.leaderElection.enabled is false: two operators would act at once" .Values.operator.replicas) -}}
{{- end -}}
{{- /* the API server refuses a container whose request exceeds its limit, after the rest of the release is applied */ -}}
{{- $resources := .Values.operator.resources | default dict -}}
{{- $limits := $resources.limits | default dict -}}
{{- range $name, $request := $resources.requests | default dict -}}
{{- if and (hasKey $limits $name) (gt (include "sa.quantity" $request | float64) (include "sa.quantity" (get $limits $name) | float64)) -}}
{{- fail (printf "operator.resources: requests.%s (%v) must not exceed limits.%s (%v): the API server refuses the operator's Deployment" $name $request $name (get $limits $name)) -}}
{{- end -}}
{{- end -}}
{{- /* with egress policed, the operator (its watches, the apps' children) and the drivers (executor
       pods) reach the Kubernetes API server only through apiServerCIDRs: none, and nothing works */ -}}
{{- $egress := .Values.networkPolicy.egress -}}
{{- if and .Values.networkPolicy.enabled $egress.enabled (not $egress.apiServerCIDRs) -}}
{{- fail "networkPolicy.egress.enabled needs networkPolicy.egress.apiServerCIDRs: the operator and the drivers call the Kubernetes API server, and the policies would let them reach only DNS and the apps' pods (the addresses: kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes)" -}}
{{- end -}}
{{- /* the operator's own pods: the API server refused its Deployment's pods (a ReplicaSet that
       never made one) for a toleration the schema took */ -}}
{{- include "sa.tolerationChecks" (list "operator.tolerations" .Values.operator.tolerations) -}}
{{- /* a label the chart writes, given again, is a key twice in the rendered map: the last wins,
       and the operator's pods no longer matched its Deployment's selector */ -}}
{{- $own := list "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "app.kubernetes.io/component" -}}
{{- range $key, $labels := dict "commonLabels" .Values.commonLabels "operator.podLabels" .Values.operator.podLabels -}}
{{- range $label := $own -}}
{{- if hasKey ($labels | default dict) $label -}}
{{- fail (printf "%s: %s is a label the chart sets (its selectors match on it); use another key" $key $label) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $i, $app := .Values.apps -}}
{{- if not (has $app.namespace $.Values.namespaces) -}}
{{- fail (printf "apps[%d].namespace %q is not in namespaces (%s): the operator would not see it" $i $app.namespace (join ", " $.Values.namespaces)) -}}
{{- end -}}
{{- $key := printf "%s/%s" $app.namespace $app.name -}}
{{- if hasKey $seen $key -}}
{{- fail (printf "apps[%d]: %s is apps[%v] already: one SparkStreamingApp would overwrite the other" $i $key (get $seen $key)) -}}
{{- end -}}
{{- $_ := set $seen $key $i -}}
{{- /* the CRD's cross-field rules (x-kubernetes-validations in crds/): the API server refuses
       such an app after the rest of the release is installed, a release failed half applied */ -}}
{{- $pipelines := $app.spec.pipelines | default dict -}}
{{- if eq (hasKey $pipelines "module") (hasKey $pipelines "configMapRef") -}}
{{- fail (printf "apps[%d].spec.pipelines: set exactly one of pipelines.module and pipelines.configMapRef" $i) -}}
{{- end -}}
{{- $scaling := $app.spec.scaling | default dict -}}
{{- if and (hasKey $scaling "minExecutors") (hasKey $scaling "maxExecutors") (gt (int $scaling.minExecutors) (int $scaling.maxExecutors)) -}}
{{- fail (printf "apps[%d].spec.scaling: minExecutors (%v) must not exceed maxExecutors (%v)" $i $scaling.minExecutors $scaling.maxExecutors) -}}
{{- end -}}
{{- /* the operator's checks (autoscaler/operator/model.py), refused there only in the app's status:
       each bound as the daemon holds it, the app's or the daemon's default (ExecutorSettings: 1, 8) */ -}}
{{- $lo := ternary $scaling.minExecutors 1 (hasKey $scaling "minExecutors") | int -}}
{{- $hi := ternary $scaling.maxExecutors 8 (hasKey $scaling "maxExecutors") | int -}}
{{- if gt $lo $hi -}}
{{- fail (printf "apps[%d].spec.scaling: minExecutors (%d) exceeds the daemon's default maxExecutors (%d): set maxExecutors too" $i $lo $hi) -}}
{{- end -}}
{{- range $field := list "initialExecutors" "manualExecutors" -}}
{{- if and (hasKey $scaling $field) (or (lt (int (get $scaling $field)) $lo) (gt (int (get $scaling $field)) $hi)) -}}
{{- fail (printf "apps[%d].spec.scaling: %s (%v) must lie within minExecutors and maxExecutors, [%d, %d] (the daemon's defaults where unset)" $i $field (get $scaling $field) $lo $hi) -}}
{{- end -}}
{{- end -}}
{{- include "sa.operatorSpecChecks" (list $i $app.spec) -}}
{{- /* the CRD keys its queries by name (a list map): a name twice is refused by the API server */ -}}
{{- $queries := dict -}}
{{- range $j, $query := $app.spec.queries | default list -}}
{{- if hasKey $queries $query.name -}}
{{- fail (printf "apps[%d].spec.queries[%d]: query %q is queries[%v] already: the API server refuses an app that names a query twice" $i $j $query.name (get $queries $query.name)) -}}
{{- end -}}
{{- $_ := set $queries $query.name $j -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "bad" when the text is no Kubernetes label or annotation key (the operator's _key_problem):
[a DNS subdomain prefix/]a name of at most 63 letters, digits, '-', '_', '.'. */}}
{{- define "sa.badLabelKey" -}}
{{- $name := regexReplaceAll "^.*/" . "" -}}
{{- if or (not (regexMatch "^(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" .)) (gt (len $name) 63) (gt (len (trimSuffix $name .)) 254) -}}
bad
{{- end -}}
{{- end -}}

{{/* "bad" when the text is no Kubernetes label value (the operator's _value_problem). */}}
{{- define "sa.badLabelValue" -}}
{{- if or (gt (len .) 63) (not (regexMatch "^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$" .)) -}}
bad
{{- end -}}
{{- end -}}

{{- /* tolerations as the API server takes them (the operator's model, Toleration; ValidateTolerations):
(list WHERE TOLERATIONS); a refusal names WHERE.INDEX */ -}}
{{- define "sa.tolerationChecks" -}}
{{- $at := index . 0 -}}
{{- range $j, $toleration := index . 1 | default list -}}
{{- $where := printf "%s.%d" $at $j -}}
{{- $exists := eq ($toleration.operator | default "") "Exists" -}}
{{- $key := $toleration.key | default "" -}}
{{- $value := $toleration.value | default "" -}}
{{- if and (hasKey $toleration "tolerationSeconds") (ne ($toleration.effect | default "") "NoExecute") -}}
{{- fail (printf "%s: effect must be NoExecute when tolerationSeconds is set (only NoExecute evicts), got %s" $where (ternary (printf "'%s'" $toleration.effect) "none" (not (empty $toleration.effect)))) -}}
{{- end -}}
{{- if and (not $key) (not $exists) -}}
{{- fail (printf "%s: operator must be Exists when key is empty (which tolerates every taint)" $where) -}}
{{- end -}}
{{- if and $key (include "sa.badLabelKey" $key) -}}
{{- fail (printf "%s: key '%s' is not a Kubernetes label or annotation key ([prefix/]name, name at most 63 letters, digits, '-', '_', '.')" $where $key) -}}
{{- end -}}
{{- if and $exists $value -}}
{{- fail (printf "%s: value must be empty when operator is Exists, got '%s'" $where $value) -}}
{{- end -}}
{{- if and (not $exists) (include "sa.badLabelValue" $value) -}}
{{- fail (printf "%s: value '%s' is not a Kubernetes label value (at most 63 letters, digits, '-', '_', '.')" $where $value) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The rest of the operator's checks of an app's spec (autoscaler/operator/model.py), each
refused there only in the app's status after Helm installed the app: the same rule, the
operator's words after "apps[<i>].". Called with (list <index> <spec>). */}}
{{- define "sa.operatorSpecChecks" -}}
{{- $i := index . 0 -}}
{{- $spec := index . 1 -}}
{{- $at := printf "apps[%d].spec" $i -}}
{{- /* durations as the daemon reads them: at most ten years; a trigger within 100ms .. 24h, as
       the daemon's REST API takes it (MIN_TRIGGER, MAX_TRIGGER) */ -}}
{{- $scaling := $spec.scaling | default dict -}}
{{- if and (hasKey $scaling "requestTimeout") (gt (include "sa.durationSeconds" $scaling.requestTimeout | float64) 315360000.0) -}}
{{- fail (printf "%s.scaling.requestTimeout: duration must be at most 3650d (about ten years), got '%s'" $at $scaling.requestTimeout) -}}
{{- end -}}
{{- range $j, $query := $spec.queries | default list -}}
{{- if hasKey $query "triggerInterval" -}}
{{- $seconds := include "sa.durationSeconds" $query.triggerInterval | float64 -}}
{{- if or (lt $seconds 0.1) (gt $seconds 86400.0) -}}
{{- fail (printf "%s.queries.%d.triggerInterval: must lie within 100ms and 24h (the daemon's REST API takes no other), got '%s'" $at $j $query.triggerInterval) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* a checkpoint root that outlives the pod: a URI or an absolute path (a file: URI's path) */ -}}
{{- $root := $spec.checkpointRoot -}}
{{- $path := $root -}}
{{- if hasPrefix "file:" (lower $root) -}}
{{- $path = regexReplaceAll "^//[^/]*" (substr 5 -1 $root) "" -}}
{{- end -}}
{{- $uri := and (regexMatch "^[A-Za-z][A-Za-z0-9+.-]*:" $root) (not (hasPrefix "file:" (lower $root))) -}}  {{- /* is_uri */ -}}
{{- if ne $root (trim $root) -}}
{{- fail (printf "%s.checkpointRoot: has a space at its start or end" $at) -}}
{{- else if and (not $uri) (not (trim $path)) -}}
{{- fail (printf "%s.checkpointRoot: must name a directory or a URI (s3a://bucket/checkpoints), got an empty value" $at) -}}
{{- else if and (not $uri) (not (hasPrefix "/" $path)) -}}
{{- fail (printf "%s.checkpointRoot: '%s' is relative: under the pod's working directory, lost with the pod; give a URI (s3a://bucket/ck) or the absolute path of a mounted volume" $at $root) -}}
{{- end -}}
{{- /* what the operator writes from other fields (OWNED_SPARK_CONF, OWNED_SETTINGS, OWNED_PIPELINE_SETTINGS) */ -}}
{{- $ownedConf := dict
      "spark.master" "the operator runs the daemon as the driver on Kubernetes"
      "spark.submit.deployMode" "the daemon is the driver (client mode)"
      "spark.kubernetes.namespace" "executors run in the app's namespace"
      "spark.kubernetes.container.image" "set spec.image"
      "spark.kubernetes.container.image.pullPolicy" "set spec.imagePullPolicy"
      "spark.kubernetes.container.image.pullSecrets" "set spec.imagePullSecrets"
      "spark.kubernetes.executor.podTemplateFile" "set spec.executor"
      "spark.kubernetes.authenticate.executor.serviceAccountName" "the chart's executor service account"
      "spark.kubernetes.driver.pod.name" "the daemon sets it from its pod"
      "spark.executor.cores" "set spec.executor.cores"
      "spark.kubernetes.executor.request.cores" "set spec.executor.cores"
      "spark.executor.memory" "set spec.executor.memory"
      "spark.driver.memory" "set spec.driver.memory"
      "spark.executor.instances" "set spec.scaling.initialExecutors"
      "spark.driver.port" "fixed (7078) for the network policies"
      "spark.blockManager.port" "fixed (7079) for the network policies"
      "spark.app.name" "set to <namespace>-<name>, the application label of the metrics" -}}
{{- $owned := list -}}
{{- range $key := keys ($spec.sparkConf | default dict) | sortAlpha -}}
{{- if hasKey $ownedConf $key -}}
{{- $owned = append $owned (printf "%s: set by the operator (%s)" $key (get $ownedConf $key)) -}}
{{- end -}}
{{- end -}}
{{- if $owned -}}
{{- fail (printf "%s.sparkConf: %s" $at (join "; " $owned)) -}}
{{- end -}}
{{- $ownedSettings := dict
      "mode" "set spec.scaling.mode"
      "dry_run" "set spec.scaling.dryRun"
      "request_timeout" "set spec.scaling.requestTimeout"
      "executors" "set spec.scaling and spec.executor"
      "policy" "set spec.scaling.policy"
      "spark" "set spec.sparkConf"
      "http" "set spec.http"
      "state" "the operator keeps the state in the ConfigMap <name>-state" -}}
{{- $settings := $spec.settings | default dict -}}
{{- $owned = list -}}
{{- range $key := keys $settings | sortAlpha -}}
{{- if hasKey $ownedSettings $key -}}
{{- $owned = append $owned (printf "%s: written by the operator (%s)" $key (get $ownedSettings $key)) -}}
{{- end -}}
{{- end -}}
{{- $pipelines := ternary (get $settings "pipelines") nil (hasKey $settings "pipelines") -}}
{{- $ownedPipelines := dict "module" "set spec.pipelines" "checkpoint_root" "set spec.checkpointRoot" -}}
{{- if kindIs "map" $pipelines -}}
{{- range $key := list "module" "checkpoint_root" -}}
{{- if hasKey $pipelines $key -}}
{{- $owned = append $owned (printf "pipelines.%s: written by the operator (%s)" $key (get $ownedPipelines $key)) -}}
{{- end -}}
{{- end -}}
{{- else if kindIs "string" $pipelines -}}
{{- $owned = append $owned (printf "pipelines: must be a mapping of pipeline settings, got '%s'" $pipelines) -}}
{{- else if not (kindIs "invalid" $pipelines) -}}  {{- /* null: no pipeline settings, as the operator reads it */ -}}
{{- $owned = append $owned (printf "pipelines: must be a mapping of pipeline settings, got %v" $pipelines) -}}
{{- end -}}
{{- if $owned -}}
{{- fail (printf "%s.settings: %s" $at (join "; " $owned)) -}}
{{- end -}}
{{- /* the driver's and the executors' pods: Spark refuses a JVM under 450m (MIN_SPARK_MEMORY_MIB);
       label and annotation syntax, the driver's env names once each and none the operator sets */ -}}
{{- $mib := dict "k" 0.0009765625 "m" 1.0 "g" 1024.0 "t" 1048576.0 -}}
{{- range $role := list "driver" "executor" -}}
{{- $pod := get $spec $role | default dict -}}
{{- if hasKey $pod "memory" -}}
{{- if lt (mulf (regexFind "^[0-9]+" $pod.memory | float64) (get $mib (regexFind "[a-zA-Z]$" $pod.memory | lower))) 450.0 -}}
{{- fail (printf "%s.%s.memory: '%s' is less than the 450m a Spark JVM starts with" $at $role $pod.memory) -}}
{{- end -}}
{{- end -}}
{{- include "sa.tolerationChecks" (list (printf "%s.%s.tolerations" $at $role) (get $pod "tolerations")) -}}
{{- range $field := list "podLabels" "podAnnotations" "nodeSelector" -}}
{{- range $key, $value := get $pod $field | default dict -}}
{{- if include "sa.badLabelKey" $key -}}
{{- fail (printf "%s.%s.%s: key '%s' is not a Kubernetes label or annotation key ([prefix/]name, name at most 63 letters, digits, '-', '_', '.')" $at $role $field $key) -}}
{{- end -}}
{{- if and (ne $field "podAnnotations") (include "sa.badLabelValue" $value) -}}
{{- fail (printf "%s.%s.%s: %s: value '%s' is not a Kubernetes label value (at most 63 letters, digits, '-', '_', '.')" $at $role $field $key $value) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $names := list -}}
{{- range $env := ($spec.driver | default dict).env | default list -}}
{{- $names = append $names $env.name -}}
{{- end -}}
{{- $set := list -}}
{{- $twice := list -}}
{{- range $name := $names | uniq | sortAlpha -}}
{{- if has $name (list "POD_NAME" "POD_NAMESPACE" "POD_IP" "SPARK_LOCAL_IP" "HOME") -}}
{{- $set = append $set $name -}}
{{- end -}}
{{- $n := 0 -}}
{{- range $other := $names -}}
{{- if eq $other $name -}}
{{- $n = add1 $n -}}
{{- end -}}
{{- end -}}
{{- if gt $n 1 -}}
{{- $twice = append $twice $name -}}
{{- end -}}
{{- end -}}
{{- if $set -}}
{{- fail (printf "%s.driver.env: %s: set by the operator" $at (join ", " $set)) -}}
{{- else if $twice -}}
{{- fail (printf "%s.driver.env: %s listed more than once" $at (join ", " $twice)) -}}
{{- end -}}
{{- end -}}

{{- define "sa.podSecurityContext" -}}
{{ toYaml .Values.podSecurityContext }}
{{- end -}}

{{- define "sa.securityContext" -}}
{{ toYaml .Values.securityContext }}
{{- end -}}

{{/* Egress when networkPolicy.egress.enabled: DNS, the API server, the app's own pods, and yours. */}}
{{- define "sa.egress" -}}
{{- $e := .Values.networkPolicy.egress -}}
{{- if $e.dns }}
- to:
    - namespaceSelector: {}
      podSelector:
        matchLabels: {k8s-app: kube-dns}
  ports:
    - {port: 53, protocol: UDP}
    - {port: 53, protocol: TCP}
{{- end }}
{{- if $e.apiServerCIDRs }}
- to:
    {{- range $e.apiServerCIDRs }}
    - ipBlock: {cidr: {{ . | quote }}}
    {{- end }}
  ports:
    {{- range $e.apiServerPorts }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
{{- end }}
- to:
    - podSelector:
        matchLabels:
          {{- include "sa.daemonSelector" . | nindent 10 }}
    - podSelector:
        matchLabels:
          {{- include "sa.executorSelector" . | nindent 10 }}
{{- with $e.extraRules }}
{{ toYaml . }}
{{- end }}
{{- end -}}
