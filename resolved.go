package sandbox

import (
	"log/slog"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/recipe"
)

// resolved is Options as New resolves them, once, into what Runs read:
// each group's choice flattened into the settings it stands for, and
// copied, so that later changes to the caller's Options, or to what they
// point to, do not reach the Sandbox. Nothing changes it after New, and
// nothing of it does I/O.
type resolved struct {
	Rootfs string // RootDir
	Image  *Image // the *Image Root, a copy

	Workspace     string // HostWorkspace.Dir
	WorkspaceSize int64
	WorkspaceFrom string
	// FreshWorkspace and TrackChanges say FreshWorkspace and
	// SessionWorkspace.TrackChanges.
	FreshWorkspace bool
	TrackChanges   bool

	Binds            []Bind
	TrustedCAs       []byte
	Env              []string
	Hostname         string
	HostUID, HostGID int

	Limits Limits

	InProcess bool
	Pool      int // Pool.Size

	Live                     bool
	IdleTimeout, MaxLifetime time.Duration

	// Seccomp is the policy given, nil for the default; NoSeccomp says
	// Unconfined; SeccompKill the policy's KillOnRefusal.
	Seccomp     *SeccompPolicy
	NoSeccomp   bool
	SeccompKill bool

	Network        netMode
	Egress         []string // Egress.Allow
	EgressResolver Resolver
	Secrets        []Secret

	Logger    *slog.Logger
	Audit     slog.Handler // Audit.Handler
	AuditExec bool
	// invalid is what resolve found wrong in a group's value, which the
	// flat settings cannot show (a RootDir or HostWorkspace.Dir left
	// empty, an Audit without a Handler); validate reports it first.
	invalid error
}

// resolve flattens o. What it cannot express (a type outside the
// package's own, through a nil pointer) validate reports.
func resolve(o Options) resolved {
	r := resolved{
		Binds: slices.Clone(o.Binds), TrustedCAs: slices.Clone(o.TrustedCAs), Env: slices.Clone(o.Env),
		Hostname: o.Hostname, HostUID: o.HostUID, HostGID: o.HostGID, Logger: o.Logger,
		Limits: o.Limits,
	}
	switch root := o.Root.(type) {
	case RootDir:
		r.Rootfs = string(root)
		if root == "" {
			r.invalid = optionErr("Options.Root (RootDir)", "", "is empty: name an absolute host directory, or leave Options.Root nil for the host's")
		}
	case *Image:
		if root != nil {
			im := *root
			im.Mirrors = cloneMirrors(im.Mirrors)
			r.Image = &im
		}
	}
	switch ws := o.Workspace.(type) {
	case SessionWorkspace:
		r.WorkspaceSize, r.WorkspaceFrom, r.TrackChanges = ws.Size, ws.From, ws.TrackChanges
	case FreshWorkspace:
		r.WorkspaceSize, r.FreshWorkspace = ws.Size, true
	case HostWorkspace:
		r.Workspace = ws.Dir
		if ws.Dir == "" {
			r.invalid = optionErr("Options.Workspace (HostWorkspace.Dir)", "", "is empty: name an absolute host directory, or leave Options.Workspace nil for the session's own")
		}
	}
	switch st := o.Start.(type) {
	case Pool:
		r.Pool = st.Size
	case InProcess:
		r.InProcess = true
	}
	if o.Live != nil {
		r.Live, r.IdleTimeout, r.MaxLifetime = true, o.Live.IdleTimeout, o.Live.MaxLifetime
	}
	switch sc := o.Seccomp.(type) {
	case *SeccompPolicy:
		if sc != nil {
			p := *sc
			p.Rules = slices.Clone(p.Rules)
			r.Seccomp, r.SeccompKill = &p, p.KillOnRefusal
		}
	case Unconfined:
		r.NoSeccomp = true
	}
	switch n := o.Network.(type) {
	case *Egress:
		if n != nil {
			r.Network, r.Egress, r.EgressResolver, r.Secrets = netAllow, slices.Clone(n.Allow), n.Resolver, slices.Clone(n.Secrets)
		}
	case HostNetworkUnsafe:
		r.Network = netHost
	}
	if o.Audit != nil {
		r.Audit, r.AuditExec = o.Audit.Handler, o.Audit.Exec
		if o.Audit.Handler == nil {
			r.invalid = optionErr("Options.Audit.Handler", "nil", "is needed: the trail is handed to it (leave Options.Audit nil for no trail)")
		}
	}
	return r
}

// rootView is what a run needs of its root, found once: in New for a
// RootDir or the host's directories, at the pull for an *Image.
type rootView struct {
	dir    string   // the host directory replacing the system directories; "" for the host's
	layers []string // an image's overlay layers, top first; nil: dir as it is
	// bundle is the trust store's bundle in the root (for
	// NODE_EXTRA_CA_CERTS), or "".
	bundle  string
	env     []string // the image config's environment
	workDir string   // the image config's working directory, or DefaultDir
	ref     string   // the image's reference, for errors; "" without one
}

// newRootView finds what a run needs of the root dir (empty: the host's),
// or of img where that is set.
func newRootView(o *resolved, dir string, img *image.Image) *rootView {
	v := &rootView{dir: dir, workDir: DefaultDir}
	if img != nil {
		v.dir, v.ref = img.Root, o.Image.Ref
		v.layers = o.rootfsLayers(img)
		for _, kv := range img.Env {
			if k, _, ok := strings.Cut(kv, "="); ok && k != "" && !strings.ContainsRune(kv, 0) {
				v.env = append(v.env, kv)
			}
		}
		if img.WorkingDir != "" && !strings.ContainsRune(img.WorkingDir, 0) {
			v.workDir = path.Join("/", img.WorkingDir)
		}
	}
	v.bundle = recipe.TrustBundleIn(v.dir, len(o.TrustedCAs) > 0 || len(o.Secrets) > 0)
	return v
}
