// Package server assembles the MCP server (github.com/mark3labs/mcp-go) and
// serves it over stdio, streamable HTTP and SSE.
//
// It owns the transport-level rules: who may connect (a bearer token on HTTP
// and SSE, compared in constant time), from where (Host and Origin checks
// against DNS rebinding), how much they may send (request body limits), how
// long an idle session lives, and a clean shutdown. It does not decide tool
// calls — package tools does that, through package policy — and it never
// writes anything but JSON-RPC to stdout.
package server
