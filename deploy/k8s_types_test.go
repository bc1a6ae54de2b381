package deploy

// Minimal Kubernetes object shapes: only the fields the checks read. Decoding is lenient (unknown
// fields are ignored) because these are views, not schemas; the checks state what must be present.
// yaml.v3 decodes a YAML integer into a string field, which is how int-or-string fields
// (targetPort, maxUnavailable, probe ports) are held.

type meta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

// matches reports whether the selector selects a pod with labels (an empty selector selects
// nothing here: every selector in the manifests must name labels).
func (s labelSelector) matches(labels map[string]string) bool {
	return selects(s.MatchLabels, labels)
}

// selects reports whether every key of sel is in labels with the same value; an empty sel selects
// nothing.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// workloadSpec is the spec of a StatefulSet or Deployment (serviceName and podManagementPolicy
// are StatefulSet-only and empty for a Deployment).
type workloadSpec struct {
	Replicas            *int          `yaml:"replicas"`
	ServiceName         string        `yaml:"serviceName"`
	PodManagementPolicy string        `yaml:"podManagementPolicy"`
	Selector            labelSelector `yaml:"selector"`
	Template            struct {
		Metadata meta    `yaml:"metadata"`
		Spec     podSpec `yaml:"spec"`
	} `yaml:"template"`
}

type podSpec struct {
	SecurityContext *securityContext `yaml:"securityContext"`
	Containers      []container      `yaml:"containers"`
	InitContainers  []container      `yaml:"initContainers"`
	Volumes         []volume         `yaml:"volumes"`
}

type securityContext struct {
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	RunAsUser                *int64 `yaml:"runAsUser"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	Privileged               *bool  `yaml:"privileged"`
	Capabilities             *struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
}

// container is one entry of spec.containers. Command and Args are as written (before $(VAR)
// expansion); see podArgs.
type container struct {
	Name            string           `yaml:"name"`
	Image           string           `yaml:"image"`
	Command         []string         `yaml:"command"`
	Args            []string         `yaml:"args"`
	Env             []envVar         `yaml:"env"`
	Ports           []containerPort  `yaml:"ports"`
	ReadinessProbe  *probe           `yaml:"readinessProbe"`
	LivenessProbe   *probe           `yaml:"livenessProbe"`
	StartupProbe    *probe           `yaml:"startupProbe"`
	Resources       resources        `yaml:"resources"`
	VolumeMounts    []volumeMount    `yaml:"volumeMounts"`
	SecurityContext *securityContext `yaml:"securityContext"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type containerPort struct {
	Name          string `yaml:"name"`
	ContainerPort int    `yaml:"containerPort"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type resources struct {
	Requests map[string]string `yaml:"requests"`
	Limits   map[string]string `yaml:"limits"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	SubPath   string `yaml:"subPath"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name  string `yaml:"name"`
		Items []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
	} `yaml:"secret"`
	EmptyDir any `yaml:"emptyDir"`
}

// serviceSpec is a Service's spec. TargetPort holds a number or a port name; empty means "same as
// port", as in Kubernetes.
type serviceSpec struct {
	Type                     string            `yaml:"type"`
	ClusterIP                string            `yaml:"clusterIP"`
	PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
	Selector                 map[string]string `yaml:"selector"`
	Ports                    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort string `yaml:"targetPort"`
	} `yaml:"ports"`
}

func (s serviceSpec) headless() bool { return s.ClusterIP == "None" }

// pdbSpec is a PodDisruptionBudget's spec: exactly one of MinAvailable and MaxUnavailable (an
// integer or a percentage) must be set.
type pdbSpec struct {
	MinAvailable   *string       `yaml:"minAvailable"`
	MaxUnavailable *string       `yaml:"maxUnavailable"`
	Selector       labelSelector `yaml:"selector"`
}

// kustomization is the part of kustomization.yaml the checks read: plain resource files only
// (no generators, patches or remote bases, which the manifests do not use).
type kustomization struct {
	Resources []string `yaml:"resources"`
}
