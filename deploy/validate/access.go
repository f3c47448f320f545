package validate

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// loopbackAddr reports whether a listen address takes connections from
// this host only: the server refuses any other without authentication.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authProblem says what is missing when sa listens beyond loopback
// without authentication, or with half of one; "" when nothing is.
func authProblem(sa *serverArgs) string {
	switch {
	case sa.value("oidc-issuer") != "" && sa.value("oidc-audience") == "":
		return "-oidc-issuer needs -oidc-audience: a token for any audience of the issuer would do"
	case (sa.value("tls-cert") == "") != (sa.value("tls-key") == ""):
		return "-tls-cert and -tls-key go together"
	case sa.value("client-ca") != "" && sa.value("tls-cert") == "":
		return "-client-ca needs -tls-cert and -tls-key: client certificates come only over TLS"
	}
	if loopbackAddr(sa.value("addr")) || sa.value("insecure-no-auth") == "true" ||
		sa.value("api-keys") != "" || sa.value("oidc-issuer") != "" || sa.value("client-ca") != "" {
		return ""
	}
	return fmt.Sprintf("-addr=%s listens beyond loopback without authentication, which the server refuses to start with: add -api-keys FILE (from a Secret), -oidc-issuer with -oidc-audience, or -client-ca; or -insecure-no-auth on a network where every caller is trusted", sa.value("addr"))
}

// access checks the container's authentication and the files it reads.
func (c *checker) access() {
	file := c.dep.File
	if msg := authProblem(c.args); msg != "" {
		c.add(file, c.argField("addr"), "%s", msg)
	}
	pod := &c.dep.Template.Spec
	for _, flag := range fileFlags {
		p := c.args.value(flag)
		if p == "" {
			continue
		}
		if msg := c.fileProblem(pod, flag, p); msg != "" {
			c.add(file, c.argField(flag), "-%s=%s: %s", flag, p, msg)
		}
	}
	if c.dep.Sandbox {
		c.sandboxHosts()
	} else {
		c.allowedHosts()
	}
}

// fileProblem says why the file p that flag names would not be there, or
// be writable, in the container; "" when it comes read-only from a volume
// of the pod (a Secret for secretFileFlags).
func (c *checker) fileProblem(pod *corev1.PodSpec, flag, p string) string {
	if !path.IsAbs(p) {
		return "want an absolute path into a volumeMount"
	}
	var m *corev1.VolumeMount
	for i := range c.ctr.VolumeMounts {
		vm := &c.ctr.VolumeMounts[i]
		mp := path.Clean(vm.MountPath)
		if (p == mp || strings.HasPrefix(p, mp+"/")) && (m == nil || len(mp) > len(path.Clean(m.MountPath))) {
			m = vm
		}
	}
	if m == nil {
		return "no volumeMount holds it: the root file system has no such file"
	}
	if !m.ReadOnly {
		return fmt.Sprintf("volumeMount %q is not readOnly: the server's own files must not be writable by it", m.Name)
	}
	var v *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == m.Name {
			v = &pod.Volumes[i]
		}
	}
	if v == nil {
		return fmt.Sprintf("volumeMount %q names no volume of the pod", m.Name)
	}
	isSecret := false
	for _, s := range secretFileFlags {
		isSecret = isSecret || s == flag
	}
	if isSecret && v.Secret == nil {
		return fmt.Sprintf("volume %q is not a Secret: -%s holds keys or key hashes", v.Name, flag)
	}
	if v.Secret == nil {
		return ""
	}
	mode := int32(0o644) // the API's default for a Secret volume
	if v.Secret.DefaultMode != nil {
		mode = *v.Secret.DefaultMode
	}
	if len(v.Secret.Items) > 0 && m.SubPath == "" {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, path.Clean(m.MountPath)), "/")
		found := false
		for _, it := range v.Secret.Items {
			if path.Clean(it.Path) == rel {
				found = true
				if it.Mode != nil {
					mode = *it.Mode
				}
			}
		}
		if !found {
			return fmt.Sprintf("volume %q's items project no %q", v.Name, rel)
		}
	}
	return c.unreadable(pod, v.Name, mode)
}

// unreadable says why the server could not read a file of the Secret
// volume name, of mode mode; "" when it can. The kubelet writes a
// Secret's files owned by root, their group the pod's fsGroup if it has
// one (which the container's processes then hold too), else root's.
func (c *checker) unreadable(pod *corev1.PodSpec, name string, mode int32) string {
	var uid, gid *int64
	var groups []int64
	var fsGroup *int64
	if sc := pod.SecurityContext; sc != nil {
		uid, gid, fsGroup, groups = sc.RunAsUser, sc.RunAsGroup, sc.FSGroup, sc.SupplementalGroups
	}
	if sc := c.ctr.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
	}
	if uid == nil {
		return "" // the image's user, which the Dockerfile's checks hold to a number
	}
	fileGroup := int64(0)
	if fsGroup != nil {
		fileGroup = *fsGroup
	}
	inGroup := fsGroup != nil || gid != nil && *gid == fileGroup
	for _, g := range groups {
		inGroup = inGroup || g == fileGroup
	}
	switch {
	case mode&0o004 != 0, *uid == 0 && mode&0o400 != 0, inGroup && mode&0o040 != 0:
		return ""
	}
	why := "no fsGroup, so the files' group is root's"
	if fsGroup != nil {
		why = fmt.Sprintf("fsGroup %d", *fsGroup)
	}
	return fmt.Sprintf("volume %q's files are mode %04o, owned by root with %s, and the server runs as uid %d: it cannot read them and fails at start (permission denied); set the pod's securityContext.fsGroup, which the files' group and the server's groups then include, or a mode that lets the server read them", name, mode, why, *uid)
}

// allowedHosts checks that -allow-host names every host a request
// reaches the server by: the name of each Service that selects the pods,
// in every form the cluster's DNS resolves, and each possible pod's name
// under -peer-url, which forwarded requests carry. The server refuses a
// request for any other Host (403).
func (c *checker) allowedHosts() {
	if loopbackAddr(c.args.value("addr")) {
		return
	}
	allowed := map[string]bool{}
	for _, h := range strings.Split(c.args.value("allow-host"), ",") {
		allowed[strings.ToLower(strings.TrimSpace(h))] = true
	}
	var missing []string
	need := func(h string) {
		if !allowed[h] {
			missing = append(missing, h)
		}
	}
	ns := ""
	if k := c.b.Kustomization; k != nil {
		ns = k.Namespace
	}
	sel := c.podLabels()
	for _, s := range c.b.Services {
		if len(s.Obj.Spec.Selector) == 0 || !selectsAll(s.Obj.Spec.Selector, sel) || s.Obj.Name == c.dep.ServiceName {
			continue
		}
		n, sns := s.Obj.Name, ns
		if s.Obj.Namespace != "" {
			sns = s.Obj.Namespace
		}
		need(n)
		if sns != "" {
			need(n + "." + sns)
			need(n + "." + sns + ".svc")
			need(n + "." + sns + ".svc.cluster.local")
		}
	}
	if tmpl := c.args.value("peer-url"); tmpl != "" && c.dep.Kind == "StatefulSet" {
		for i := range c.maxReplicas() {
			u, err := url.Parse(strings.ReplaceAll(tmpl, "{replica}", fmt.Sprintf("%s-%d", c.dep.Name, i)))
			if err == nil {
				need(strings.ToLower(u.Hostname()))
			}
		}
	}
	if len(missing) > 0 {
		c.add(c.dep.File, c.argField("allow-host"), "the server would refuse (403) requests for Host %s: add them to -allow-host", strings.Join(missing, ", "))
	}

}

// selectsAll reports whether a Service's selector matches pods labelled
// set.
func selectsAll(selector, set map[string]string) bool {
	for k, v := range selector {
		if set[k] != v {
			return false
		}
	}
	return true
}
