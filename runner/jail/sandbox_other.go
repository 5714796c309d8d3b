//go:build !linux

package jail

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

var errNotLinux = errors.New("jail: process isolation needs Linux (namespaces, Landlock); use the e2b backend on this system")

// Check reports whether isolation is available here: never, off Linux.
func Check() error { return errNotLinux }

// Sandbox is unavailable off Linux.
type Sandbox struct{}

// Process is unavailable off Linux.
type Process struct{}

// New always fails off Linux.
func New(ctx context.Context, cfg Config) (*Sandbox, error) { return nil, errNotLinux }

func (s *Sandbox) Start(ctx context.Context, c Cmd) (*Process, error) { return nil, errNotLinux }
func (s *Sandbox) HostPath(string) (string, bool, error)              { return "", false, errNotLinux }
func (s *Sandbox) Root(string) (*os.Root, string, error)              { return nil, "", errNotLinux }
func (s *Sandbox) Owner() (int, int, bool)                            { return -1, -1, false }
func (s *Sandbox) Chown(string) error                                 { return errNotLinux }
func (s *Sandbox) Pause() error                                       { return errNotLinux }
func (s *Sandbox) Resume() error                                      { return errNotLinux }
func (s *Sandbox) Close() error                                       { return nil }
func (s *Sandbox) EgressListener() net.Listener                       { return nil }
func (p *Process) Pid() int                                           { return 0 }
func (p *Process) Stdout() io.Reader                                  { return nil }
func (p *Process) Stderr() io.Reader                                  { return nil }
func (p *Process) Stdin() io.WriteCloser                              { return nil }
func (p *Process) Signal(syscall.Signal) error                        { return errNotLinux }
func (p *Process) Wait() (ExitStatus, error)                          { return ExitStatus{}, errNotLinux }
