package e2blocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
	"github.com/sandbox-mcp/sandbox-mcp/runner/jail"
)

// sandboxSpec is a validated creation request.
type sandboxSpec struct {
	templateID    string
	timeout       time.Duration
	allowInternet bool     // the host's network (open egress)
	allowOut      []string // non-empty: egress only through the filtering proxy, to these
	network       *api.SandboxNetworkConfig
	secure        bool
	autoPause     bool
	autoResume    bool
	metadata      map[string]string
	envVars       map[string]string
}

type sandboxState int

const (
	stateRunning sandboxState = iota
	statePaused
	stateKilled
)

// sandbox is one local sandbox: a jail, its processes and its lifetime.
type sandbox struct {
	s        *Server
	id       string
	token    string // envdAccessToken; empty when not secure
	spec     sandboxSpec
	metadata map[string]string // immutable after creation
	started  time.Time
	dir      string
	owner    *os.File // flocked Dir/<id>.lock; see owner.go
	jail     *jail.Sandbox
	procs    *processTable
	fs       *sandboxFS
	proxy    *egress.Proxy // allowlist sandboxes only
	served   chan error    // the proxy's Serve result

	mu    sync.Mutex
	state sandboxState
	endAt time.Time
	timer *time.Timer
	gen   uint64 // bumped whenever endAt or the state changes, to void stale timers
}

// create makes and starts a sandbox. It returns an HTTP status with an error.
func (s *Server) create(ctx context.Context, spec sandboxSpec) (*sandbox, int, error) {
	if s.jailErr != nil {
		return nil, http.StatusServiceUnavailable, fmt.Errorf("the local sandbox cannot isolate processes on this machine, so it runs none: %v. Enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0) or use the e2b backend", s.jailErr)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, http.StatusServiceUnavailable, errors.New("the local sandbox service is shutting down")
	}
	if len(s.sandboxes)+s.pending >= s.opts.MaxSandboxes {
		s.mu.Unlock()
		return nil, http.StatusTooManyRequests, fmt.Errorf("the local sandbox service already has %d sandboxes (the maximum); kill one first", s.opts.MaxSandboxes)
	}
	s.pending++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.pending--
		s.mu.Unlock()
	}()

	id, err := newSandboxID()
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	sb := &sandbox{
		s:        s,
		id:       id,
		spec:     spec,
		metadata: maps.Clone(spec.metadata),
		started:  s.now(),
		dir:      filepath.Join(s.opts.Dir, id),
	}
	if sb.metadata == nil {
		sb.metadata = map[string]string{}
	}
	if spec.secure {
		if sb.token, err = randomHex(32); err != nil {
			return nil, http.StatusInternalServerError, err
		}
	}
	network := jail.NetworkNone
	allowlist := len(spec.allowOut) > 0
	if spec.allowInternet && !allowlist {
		network = jail.NetworkHost
		s.log.Warn("e2blocal: sandbox has open egress: the local sandbox shares this machine's network", "sandbox_id", id)
	}
	if sb.owner, err = lockOwner(sb.dir); err != nil {
		return nil, http.StatusInternalServerError, fmt.Errorf("create sandbox: %v", err)
	}
	if err := os.Mkdir(sb.dir, 0o700); err != nil {
		releaseOwner(sb.owner)
		return nil, http.StatusInternalServerError, fmt.Errorf("create sandbox directory: %w", err)
	}
	j, err := jail.New(context.WithoutCancel(ctx), jail.Config{
		Dir:      sb.dir,
		Network:  network,
		Egress:   allowlist,
		Limits:   s.opts.DefaultLimits,
		Logger:   s.log.With("sandbox_id", id),
		Hostname: "e2b-" + id,
	})
	if err != nil {
		_ = removeTree(sb.dir)
		releaseOwner(sb.owner)
		s.log.Error("e2blocal: create sandbox", "sandbox_id", id, "error", err)
		return nil, http.StatusInternalServerError, fmt.Errorf("create sandbox: %v", err)
	}
	sb.jail = j
	if allowlist {
		if err := sb.startProxy(); err != nil {
			_ = j.Close()
			_ = removeTree(sb.dir)
			releaseOwner(sb.owner)
			s.log.Error("e2blocal: create sandbox", "sandbox_id", id, "error", err)
			return nil, http.StatusInternalServerError, fmt.Errorf("create sandbox: %v", err)
		}
	}
	if sb.fs, err = newSandboxFS(j); err != nil {
		sb.stopProxy()
		_ = j.Close()
		_ = removeTree(sb.dir)
		releaseOwner(sb.owner)
		return nil, http.StatusInternalServerError, fmt.Errorf("create sandbox: %v", err)
	}
	sb.procs = newProcessTable(sb)

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = sb.destroy(ctx)
		return nil, http.StatusServiceUnavailable, errors.New("the local sandbox service is shutting down")
	}
	s.sandboxes[id] = sb
	s.mu.Unlock()

	sb.mu.Lock()
	sb.state = stateRunning
	sb.armLocked(spec.timeout)
	sb.mu.Unlock()
	s.log.Info("e2blocal: sandbox created", "sandbox_id", id, "timeout_s", int(spec.timeout/time.Second), "internet", spec.allowInternet, "allow_out", spec.allowOut, "auto_pause", spec.autoPause)
	return sb, 0, nil
}

// startProxy serves the sandbox's egress listener with a filtering proxy
// that lets through only what policy.HostAllowed allows for its allowOut.
// It keeps running while the sandbox is paused.
func (sb *sandbox) startProxy() error {
	c := allowlistContract(sb.spec.allowOut)
	onDecision := sb.s.opts.OnEgressDecision
	p, err := egress.New(egress.Options{
		Allow:    func(h string) (bool, string) { return policy.HostAllowed(c, h) },
		Resolver: sb.s.opts.EgressResolver,
		Dial:     sb.s.opts.EgressDial,
		Logger:   sb.s.log.With("sandbox_id", sb.id),
		OnDecision: func(d egress.Decision) {
			if onDecision != nil {
				onDecision(sb.id, d)
			}
		},
	})
	if err != nil {
		return err
	}
	ln := sb.jail.EgressListener()
	if ln == nil {
		_ = p.Close()
		return errors.New("the jail gave no egress listener")
	}
	sb.proxy, sb.served = p, make(chan error, 1)
	go func() {
		err := p.Serve(context.Background(), ln)
		if err != nil {
			// Serve closed the listener: the sandbox now has no way out at
			// all (connections to the proxy's address are refused).
			sb.s.log.Error("e2blocal: egress proxy stopped; the sandbox has no network now", "sandbox_id", sb.id, "error", err)
		}
		sb.served <- err
	}()
	return nil
}

// stopProxy closes the egress proxy and waits until its Serve has returned.
func (sb *sandbox) stopProxy() {
	if sb.proxy == nil {
		return
	}
	_ = sb.proxy.Close()
	<-sb.served
	sb.proxy = nil
}

// armLocked sets the expiry to now+d and (re)starts the timer. sb.mu is held.
func (sb *sandbox) armLocked(d time.Duration) {
	sb.endAt = sb.s.now().Add(d)
	sb.restartTimerLocked()
}

func (sb *sandbox) restartTimerLocked() {
	sb.gen++
	if sb.timer != nil {
		sb.timer.Stop()
		sb.timer = nil
	}
	if sb.state != stateRunning {
		return
	}
	gen := sb.gen
	sb.timer = time.AfterFunc(max(sb.endAt.Sub(sb.s.now()), 0), func() { sb.expire(gen) })
}

// expire runs when the timer fires: the sandbox is paused (autoPause) or killed.
func (sb *sandbox) expire(gen uint64) {
	sb.mu.Lock()
	if sb.gen != gen || sb.state != stateRunning {
		sb.mu.Unlock()
		return
	}
	if left := sb.endAt.Sub(sb.s.now()); left > 0 { // the injected clock disagrees: wait for it
		sb.timer = time.AfterFunc(left, func() { sb.expire(gen) })
		sb.mu.Unlock()
		return
	}
	autoPause := sb.spec.autoPause
	sb.mu.Unlock()

	log := sb.s.log.With("sandbox_id", sb.id)
	if autoPause {
		if _, err := sb.pause(); err != nil {
			log.Error("e2blocal: pause at timeout failed; killing the sandbox", "error", err)
		} else {
			log.Info("e2blocal: sandbox paused at its timeout")
			return
		}
	}
	if _, err := sb.s.kill(context.Background(), sb.id); err != nil {
		log.Error("e2blocal: kill at timeout", "error", err)
	}
	log.Info("e2blocal: sandbox killed at its timeout")
}

// pause stops the sandbox's processes in place (they resume with connect);
// files are kept and its timer stops.
func (sb *sandbox) pause() (int, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch sb.state {
	case statePaused:
		return http.StatusConflict, fmt.Errorf("sandbox %q is already paused", sb.id)
	case stateKilled:
		return http.StatusNotFound, fmt.Errorf("sandbox %q not found", sb.id)
	}
	if err := sb.jail.Pause(); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("pause sandbox %q: %v", sb.id, err)
	}
	sb.state = statePaused
	sb.restartTimerLocked()
	return 0, nil
}

// connect resumes a paused sandbox with a fresh timeout (resumed=true) or
// extends a running one's (never shortens it).
func (sb *sandbox) connect(timeout time.Duration) (resumed bool, code int, err error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch sb.state {
	case stateKilled:
		return false, http.StatusNotFound, fmt.Errorf("sandbox %q not found", sb.id)
	case statePaused:
		if err := sb.jail.Resume(); err != nil {
			return false, http.StatusInternalServerError, fmt.Errorf("resume sandbox %q: %v", sb.id, err)
		}
		sb.state = stateRunning
		sb.armLocked(timeout)
		return true, 0, nil
	}
	if end := sb.s.now().Add(timeout); end.After(sb.endAt) {
		sb.endAt = end
		sb.restartTimerLocked()
	}
	return false, 0, nil
}

// resumeForTraffic resumes a paused sandbox whose autoResume is on, with at
// least five minutes to live. It reports whether the sandbox is running.
func (sb *sandbox) resumeForTraffic() bool {
	sb.mu.Lock()
	state, auto := sb.state, sb.spec.autoResume
	sb.mu.Unlock()
	if state == stateRunning {
		return true
	}
	if state != statePaused || !auto {
		return false
	}
	_, _, err := sb.connect(5 * time.Minute)
	return err == nil
}

// setTimeout sets the expiry to now+d; extendOnly keeps a later expiry.
func (sb *sandbox) setTimeout(d time.Duration, extendOnly bool) (int, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch sb.state {
	case stateKilled:
		return http.StatusNotFound, fmt.Errorf("sandbox %q not found", sb.id)
	case statePaused:
		return http.StatusConflict, fmt.Errorf("sandbox %q is paused; resume it with POST /sandboxes/%s/connect", sb.id, sb.id)
	}
	end := sb.s.now().Add(d)
	if extendOnly && !end.After(sb.endAt) {
		return 0, nil
	}
	sb.endAt = end
	sb.restartTimerLocked()
	return 0, nil
}

// destroy kills every process of the sandbox and removes its directory.
func (sb *sandbox) destroy(ctx context.Context) error {
	sb.mu.Lock()
	if sb.state == stateKilled {
		sb.mu.Unlock()
		return nil
	}
	sb.state = stateKilled
	sb.restartTimerLocked() // stops the timer
	sb.mu.Unlock()

	var errs []error
	if sb.procs != nil {
		sb.procs.closeAll()
	}
	if sb.fs != nil {
		sb.fs.close()
	}
	sb.stopProxy()
	if sb.jail != nil {
		if err := sb.jail.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close jail: %w", err))
		}
	}
	if err := removeTree(sb.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", sb.dir, err))
	} else {
		releaseOwner(sb.owner) // kept when the directory stays, so a later New retries
	}
	if err := errors.Join(errs...); err != nil {
		sb.s.log.Error("e2blocal: sandbox cleanup", "sandbox_id", sb.id, "error", err)
		return fmt.Errorf("e2blocal: destroy sandbox %s: %w", sb.id, err)
	}
	sb.s.log.Info("e2blocal: sandbox removed", "sandbox_id", sb.id)
	return nil
}

func (sb *sandbox) apiSandbox() api.Sandbox {
	out := api.Sandbox{
		ClientID:    "local",
		EnvdVersion: EnvdVersion,
		SandboxID:   sb.id,
		TemplateID:  sb.spec.templateID,
	}
	if sb.token != "" {
		tok := sb.token
		out.EnvdAccessToken = &tok
	}
	return out
}

func (sb *sandbox) stateLocked() api.SandboxState {
	if sb.state == statePaused {
		return api.Paused
	}
	return api.Running
}

func (sb *sandbox) detail() api.SandboxDetail {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	md := api.SandboxMetadata(maps.Clone(sb.metadata))
	internet := sb.spec.allowInternet
	onTimeout := api.Kill
	if sb.spec.autoPause {
		onTimeout = api.Pause
	}
	d := api.SandboxDetail{
		AllowInternetAccess: &internet,
		ClientID:            "local",
		CpuCount:            int32(runtime.NumCPU()), // no CPU limit: the host's CPUs
		DiskSizeMB:          0,
		EndAt:               sb.endAt.UTC(),
		EnvdVersion:         EnvdVersion,
		Lifecycle:           &api.SandboxLifecycle{AutoResume: sb.spec.autoResume, OnTimeout: onTimeout},
		MemoryMB:            int32(memoryBytes(sb.s.opts.DefaultLimits) >> 20),
		Metadata:            &md,
		Network:             sb.spec.network,
		SandboxID:           sb.id,
		StartedAt:           sb.started.UTC(),
		State:               sb.stateLocked(),
		TemplateID:          sb.spec.templateID,
	}
	if sb.token != "" {
		tok := sb.token
		d.EnvdAccessToken = &tok
	}
	return d
}

func (sb *sandbox) listed() api.ListedSandbox {
	d := sb.detail()
	return api.ListedSandbox{
		ClientID:    d.ClientID,
		CpuCount:    d.CpuCount,
		DiskSizeMB:  d.DiskSizeMB,
		EndAt:       d.EndAt,
		EnvdVersion: d.EnvdVersion,
		MemoryMB:    d.MemoryMB,
		Metadata:    d.Metadata,
		SandboxID:   d.SandboxID,
		StartedAt:   d.StartedAt,
		State:       d.State,
		TemplateID:  d.TemplateID,
	}
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// newSandboxID returns "i" followed by 20 random lowercase alphanumerics.
func newSandboxID() (string, error) {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate sandbox id: %w", err)
	}
	id := make([]byte, 1, 21)
	id[0] = 'i'
	for _, c := range b {
		id = append(id, idAlphabet[int(c)%len(idAlphabet)])
	}
	return string(id), nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// memoryBytes is the sandbox's memory limit, with the jail's default (1 GiB)
// for zero.
func memoryBytes(l jail.Limits) int64 {
	if l.MemoryBytes > 0 {
		return l.MemoryBytes
	}
	return 1 << 30
}
