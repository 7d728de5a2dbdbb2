package rpc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/zap"

	"github.com/acpx-sidecar/acpx-sidecar/internal/strictjson"
	"github.com/acpx-sidecar/acpx-sidecar/protocol"
)

// callHost sends the sidecar → host request method with params and waits
// for its answer (decoded into result) or ctx. Every sidecar request gets
// its id here, from one counter (from 1), so the id is known to the
// sender: when ctx ends before the answer — the agent withdrew the
// request it stands for (cause protocol.ErrWithdrawn), a bound ran out,
// the turn or the session ended — the host is sent
// $/cancelRequest {"id": <that id>} and a later answer is ignored
// (docs/protocol.md §22 Withdrawn requests).
func (s *Server) callHost(ctx context.Context, method string, params, result any) error {
	<-s.ready
	id := jsonrpc2.ID{Num: s.hostSeq.Add(1)}
	w, err := s.conn.DispatchCall(ctx, method, params, jsonrpc2.PickID(id))
	if err != nil {
		return err
	}
	var raw json.RawMessage
	err = w.Wait(ctx, &raw)
	if err == nil && result != nil {
		// The host's answer is case-sensitive and names each member once
		// (docs/protocol.md §3): "OptionID" is not optionId, and of two
		// optionIds neither is taken. A refused answer is an error: a
		// permission it meant is not granted, an elicitation is cancelled.
		// The error is a -32602 *protocol.Error naming what is wrong (the
		// elicitation path reports it to the host in its audit notice).
		if serr := strictjson.Check(raw, result); serr != nil {
			s.log.Warn("host answer refused", zap.String("method", method), zap.String("reason", serr.Error()))
			field := serr.(*strictjson.Error).Path
			if field == "" {
				field = "result"
			}
			err = protocol.InvalidParams(field, "the host's answer to "+method+": "+serr.Error())
		} else if uerr := json.Unmarshal(raw, result); uerr != nil {
			err = protocol.InvalidParams("result", "the host's answer to "+method+" does not match its schema")
		}
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, jsonrpc2.ErrClosed) {
		// The sidecar stopped waiting: the agent withdrew the request
		// (protocol.ErrWithdrawn), a bound ran out, the turn or session
		// ended. The host's handler can stop too.
		if nerr := s.conn.Notify(context.Background(), protocol.MethodCancelRequest, map[string]jsonrpc2.ID{"id": id}); nerr != nil {
			s.log.Debug("$/cancelRequest not sent to the host", zap.Error(nerr))
		}
	}
	return err
}

// Elicitation returns the elicitation modes the host declared at
// initialize (capabilities.elicitation).
func (s *Server) Elicitation() protocol.ElicitationCaps {
	return readState(s, func(st *connState) protocol.ElicitationCaps { return st.hostElicit })
}

// RequestElicitation sends session/elicitation to the host and waits for
// its answer or ctx (docs/protocol.md §22).
func (s *Server) RequestElicitation(ctx context.Context, p protocol.ElicitationParams) (protocol.ElicitationResult, error) {
	var res protocol.ElicitationResult
	err := s.callHost(ctx, protocol.MethodSessionElicitation, p, &res)
	return res, err
}
