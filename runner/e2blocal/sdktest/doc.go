// Package sdktest runs the official E2B JS SDK (pinned in package.json) against
// the embedded E2B-compatible sandbox, e2blocal: it is how we know e2blocal
// speaks the real protocol. It holds only the suite (sdk.test.mjs) and its Go
// driver (sdk_test.go); it must never be imported, and it never talks to the
// E2B cloud.
//
// Install the SDK once with `npm ci --prefix runner/e2blocal/sdktest`; without
// it the test skips locally and fails when CI=true.
package sdktest
