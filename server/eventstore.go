package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// eventStore is a bounded in-memory mcpserver.EventStore. mcp-go needs an
// event store so that the last notification of a call is not lost on HTTP
// (mcp-go#969); its own store grows without limit, so this one keeps only
// the newest maxEvents events of each session (a client that reconnects
// after more than that has missed them, and is told the ID is unknown).
type eventStore struct {
	mu        sync.Mutex
	seq       int64
	maxEvents int
	sessions  map[string]*sessionEvents
}

type sessionEvents struct {
	events []storedEvent // oldest first, at most maxEvents
}

type storedEvent struct {
	id, stream string
	msg        json.RawMessage
}

var _ mcpserver.EventStore = (*eventStore)(nil)

func newEventStore(maxEvents int) *eventStore {
	return &eventStore{maxEvents: maxEvents, sessions: make(map[string]*sessionEvents)}
}

func (s *eventStore) StoreEvent(_ context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[sessionID]
	if se == nil {
		se = &sessionEvents{}
		s.sessions[sessionID] = se
	}
	s.seq++
	id := strconv.FormatInt(s.seq, 10)
	if len(se.events) == s.maxEvents {
		// Drop the oldest; append reallocates now and then, which
		// releases the dropped prefix.
		se.events = se.events[1:]
	}
	se.events = append(se.events, storedEvent{id: id, stream: streamID, msg: append(json.RawMessage(nil), message...)})
	return id, nil
}

func (s *eventStore) ReplayEventsAfter(_ context.Context, sessionID, lastEventID string, send func(string, json.RawMessage) error) (string, error) {
	s.mu.Lock()
	se := s.sessions[sessionID]
	var stream string
	var tail []storedEvent
	found := false
	if se != nil {
		for i, ev := range se.events {
			if ev.id == lastEventID {
				found, stream = true, ev.stream
				for _, later := range se.events[i+1:] {
					if later.stream == stream {
						tail = append(tail, later)
					}
				}
				break
			}
		}
	}
	s.mu.Unlock()
	if !found {
		return "", fmt.Errorf("%w: %s", mcpserver.ErrUnknownEventID, lastEventID)
	}
	for _, ev := range tail {
		if err := send(ev.id, ev.msg); err != nil {
			return "", err
		}
	}
	return stream, nil
}

func (s *eventStore) PurgeSession(_ context.Context, sessionID string) error {
	s.mu.Lock()
	delete(s.sessions, sessionID)
	s.mu.Unlock()
	return nil
}
