package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-mcp/sandbox-mcp/store"
)

// maxResourceBytes bounds an artifact read through resources/read, which
// carries the whole content in one JSON message.
const maxResourceBytes = 16 << 20

// Register adds the task's tools and resources to s: run_command,
// write_file, read_file, export_artifact; the contract as
// contract://<task-id>; and every artifact as artifact://<task-id>/<name>.
func (t *Task) Register(s *mcpserver.MCPServer) error {
	s.AddTools(t.runCommandTool(), t.writeFileTool(), t.readFileTool(), t.exportArtifactTool())
	t.registerHandoff(s) // handoff_to_mac and handoff_status, only with a mac section and runner

	contractURI := "contract://" + t.c.Task.ID
	s.AddResource(mcp.NewResource(contractURI, "contract",
		mcp.WithResourceDescription("The sandbox contract this task runs under (credential sources and values left out)."),
		mcp.WithMIMEType("application/json"),
	), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		body, err := json.MarshalIndent(publicContract(t), "", "  ")
		if err != nil {
			return nil, err
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: contractURI, MIMEType: "application/json", Text: string(body)}}, nil
	})

	s.AddResourceTemplate(mcp.NewResourceTemplate("artifact://{task}/{+name}", "artifact",
		mcp.WithTemplateDescription("An artifact exported from the sandbox with export_artifact."),
	), t.readArtifact)

	add := func(a store.Artifact) {
		s.AddResource(mcp.NewResource(a.URI, a.Name,
			mcp.WithResourceDescription(fmt.Sprintf("sha256 %s, %d bytes, from %s", a.SHA256, a.Size, a.SourcePath)),
		), t.readArtifact)
	}
	t.onArtifact = add
	arts, err := t.store.ListArtifacts(context.Background(), t.c.Task.ID)
	if err != nil {
		return err
	}
	for _, a := range arts {
		add(a)
	}
	return nil
}

// readArtifact serves resources/read for artifact URIs of this task.
func (t *Task) readArtifact(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	rest, ok := strings.CutPrefix(uri, "artifact://"+t.c.Task.ID+"/")
	if !ok || rest == "" {
		return nil, fmt.Errorf("no artifact %q in task %s", uri, t.c.Task.ID)
	}
	rc, art, err := t.store.OpenArtifact(ctx, t.c.Task.ID, rest)
	if err != nil {
		return nil, fmt.Errorf("artifact %q: %w", uri, err)
	}
	defer rc.Close()
	if art.Size > maxResourceBytes {
		return nil, fmt.Errorf("artifact %q is %d bytes, over the %d bytes a resource read returns; its sha256 is %s", uri, art.Size, maxResourceBytes, art.SHA256)
	}
	data, err := io.ReadAll(io.LimitReader(rc, maxResourceBytes+1))
	if err != nil {
		return nil, err
	}
	if utf8.Valid(data) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: string(data)}}, nil
	}
	return []mcp.ResourceContents{mcp.BlobResourceContents{URI: uri, MIMEType: "application/octet-stream", Blob: base64.StdEncoding.EncodeToString(data)}}, nil
}

// publicContract is the contract as the agent may see it: credentials by
// name and grant only.
func publicContract(t *Task) any {
	c := *t.c
	c.Credentials = nil
	type cred struct {
		Name  string `json:"name"`
		Grant any    `json:"grant"`
	}
	creds := make([]cred, 0, len(t.c.Credentials))
	for _, cr := range t.c.Credentials {
		creds = append(creds, cred{Name: cr.Name, Grant: cr.Grant})
	}
	return struct {
		Hash        string `json:"hash"`
		Contract    any    `json:"contract"`
		Credentials []cred `json:"credentials"`
	}{t.hash, c, creds}
}
