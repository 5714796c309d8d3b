package e2b

// The E2B wire types and clients are generated from this project's own
// interface files in spec/ (a subset of E2B's API written from the protocol
// reference). Regenerate after editing a spec file:
//
//	go install github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
//	apt-get install protobuf-compiler   # protoc
//	go generate ./runner/e2b/
//
// Generated code is committed and never edited by hand.

//go:generate sh -c "cd spec && oapi-codegen -config api.cfg.yaml api.yaml"
//go:generate sh -c "cd spec && oapi-codegen -config envd.cfg.yaml envd.yaml"
//go:generate sh -c "cd spec && protoc -I . --go_out=.. --go_opt=module=github.com/sandbox-mcp/sandbox-mcp/runner/e2b --go_opt=Mprocess/process.proto=github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process --go_opt=Mfilesystem/filesystem.proto=github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/filesystem --connect-go_out=.. --connect-go_opt=module=github.com/sandbox-mcp/sandbox-mcp/runner/e2b --connect-go_opt=Mprocess/process.proto=github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process --connect-go_opt=Mfilesystem/filesystem.proto=github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/filesystem process/process.proto filesystem/filesystem.proto"
