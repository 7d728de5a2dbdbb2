package statestore

import (
	"errors"
	"io"
)

// stage runs one step of a stream in its own goroutine behind an
// io.Pipe, so that the steps of a publication or a restore (archiving and
// hashing files; compressing; encrypting and hashing the object) use both
// cores instead of one. Nothing is buffered beyond the steps' own
// buffers: a Write returns when the stage has taken the bytes.
type stage struct {
	pw   *io.PipeWriter
	done chan error
}

// startStage runs f on the reading end of a new pipe. f's error closes
// the pipe, so the writer's next Write returns it.
func startStage(f func(r io.Reader) error) *stage {
	pr, pw := io.Pipe()
	s := &stage{pw: pw, done: make(chan error, 1)}
	go func() {
		err := f(pr)
		if err == nil {
			// f is done: anything still written is an error of the writer's
			err = errStageDone
		}
		pr.CloseWithError(err)
		if err == errStageDone {
			err = nil
		}
		s.done <- err
	}()
	return s
}

var errStageDone = errors.New("statestore: stage finished before its input")

func (s *stage) Write(p []byte) (int, error) { return s.pw.Write(p) }

// finish ends the stage's input — with err when the writer failed (f then
// reads err), else EOF — and waits for f; it returns f's error.
func (s *stage) finish(err error) error {
	s.pw.CloseWithError(err)
	return <-s.done
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
