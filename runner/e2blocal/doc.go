// Package e2blocal is the embedded E2B-compatible local sandbox: one HTTP
// handler that serves E2B's control-plane REST API (create, get, list,
// timeout, refresh, pause, connect, kill) and, for requests carrying the
// E2b-Sandbox-Id header (or a 49983-<id>.<domain> host), envd — the
// process.Process and filesystem.Filesystem Connect RPC services and the
// /health, /files and /envs routes — so that the official E2B SDKs and
// sandbox-mcp's own E2B client work against it unchanged
// (E2B_API_URL=E2B_SANDBOX_URL=http://127.0.0.1:3000).
//
// Every sandbox is a runner/jail sandbox under Options.Dir/<id>: commands
// run as the unprivileged sandbox user in Linux namespaces, with no network
// unless the creation request allows internet access, and are killed at
// their Connect-Timeout-Ms deadline together with their children. A
// sandbox expires at its timeout (killed, or paused with autoPause), and
// Server.Close kills every sandbox and removes its directory.
//
// The package owns the wire compatibility and the lifetime of sandboxes.
// It must never run a command without the jail's isolation (when the jail
// is unavailable, creation fails with a 503 that says why), never open the
// network beyond what was asked (a network setting it cannot enforce is
// refused, not ignored), never let a file path leave /home/user or /tmp (all file
// access goes through os.Root), never hold an upload in memory, and never
// leave a process or directory behind after a kill, an expiry or Close.
//
// Differences from E2B, each refused with a clear error rather than
// ignored: only the "base" template; no root user (everything runs as
// "user"); no PTYs, StreamInput, Update or WatchDir; no file metadata;
// no mcp, volume mounts, iam, network rules or egressProxy; the rest of
// E2B's API (metrics, snapshots, fork, network updates) answers 501. The
// files API reaches only /home/user and /tmp. Network: allow_internet_access:true
// shares the host's network (logged as a warning: host loopback services
// are reachable); false or omitted (unlike E2B, where omitted means open)
// gives an empty network namespace.
//
// Egress allowlists: network.allowOut with denyOut containing 0.0.0.0/0
// (the shape policy.NetworkPlanFor emits; allow wins over deny, so
// allow_internet_access does not matter then) gives an empty network
// namespace whose only way out is a filtering HTTP proxy at
// 127.0.0.1:3128 inside it (runner/egress, served from the jail's egress
// listener), deciding every host with policy.HostAllowed on a contract
// rebuilt from allowOut. Commands get HTTP_PROXY and friends set to it
// (overriding the caller's); programs that ignore them get no network,
// and there is no DNS inside. Unlike E2B: only TCP to ports 80 and 443,
// the TLS server name must match the CONNECT host, names resolving to
// private or loopback addresses are refused, and a partial denyOut or an
// allowOut without deny-all is refused rather than half enforced. The
// proxy stops with its sandbox (kill, expiry, Close) and keeps serving
// while it is paused.
//
// Each sandbox directory has an owner lock (Dir/<id>.lock) flocked by the
// server that holds it; New removes directories nobody owns, which only a
// server that died can leave (the jail kills processes with their server).
package e2blocal
