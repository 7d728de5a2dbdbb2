package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestClient_DispatchesByID: responses are matched to calls by id, a
// notification sent before a response reaches onNotify first, a request
// from the sidecar is answered -32601, and a JSON-RPC error comes back as
// *rpcError with data.code.
func TestClient_DispatchesByID(t *testing.T) {
	toClientR, toClientW := io.Pipe()
	fromClientR, fromClientW := io.Pipe()
	var mu sync.Mutex
	var events []string
	c := newClient(toClientR, fromClientW, 5*time.Second,
		func(m string, _ json.RawMessage) { mu.Lock(); events = append(events, "notify "+m); mu.Unlock() },
		func(m string) { mu.Lock(); events = append(events, "request "+m); mu.Unlock() })

	// A fake sidecar: answers id 1 with a notification first, then a
	// result; answers id 2 with an error after asking the host a request.
	srvDone := make(chan string)
	go func() {
		r := bufio.NewReader(fromClientR)
		l1, _ := r.ReadString('\n')
		io.WriteString(toClientW, `{"jsonrpc":"2.0","method":"session/update","params":{}}`+"\n")
		io.WriteString(toClientW, `{"jsonrpc":"2.0","id":1,"result":{"x":7}}`+"\n")
		l2, _ := r.ReadString('\n')
		io.WriteString(toClientW, `{"jsonrpc":"2.0","id":"p1","method":"session/requestPermission","params":{}}`+"\n")
		reply, _ := r.ReadString('\n')
		io.WriteString(toClientW, `{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"no","data":{"code":"SESSION_NOT_FOUND"}}}`+"\n")
		toClientW.Close()
		srvDone <- l1 + l2 + reply
	}()

	var res struct{ X int }
	if err := c.call("a", nil, &res); err != nil || res.X != 7 {
		t.Fatalf("call a: %v, %+v", err, res)
	}
	err := c.call("b", map[string]int{"k": 1}, nil)
	var rerr *rpcError
	if !errors.As(err, &rerr) || rerr.Data.Code != "SESSION_NOT_FOUND" {
		t.Fatalf("call b: %v, want SESSION_NOT_FOUND", err)
	}
	wire := <-srvDone
	<-c.done
	fromClientR.Close()
	for _, want := range []string{`{"jsonrpc":"2.0","id":1,"method":"a"}`, `"id":2,"method":"b","params":{"k":1}`, `"id":"p1"`, `-32601`} {
		if !strings.Contains(wire, want) {
			t.Errorf("client wrote %q, lacks %s", wire, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(events, ",") != "notify session/update,request session/requestPermission" {
		t.Errorf("events %v", events)
	}
	if err := c.call("c", nil, nil); err == nil {
		t.Errorf("call after EOF: %v", err)
	}
}
