package statestore

import (
	"context"
	"sync"

	"golang.org/x/sys/unix"
)

// partSlots reserves the part buffers of S3 uploads: each slot is
// Concurrency+1 buffers of PartSize bytes, mapped outside the Go heap
// (anonymous mmap) so that they do not double the garbage collector's
// heap target, made on first use and kept for the Store's life. An upload
// holds one slot from newObject to commit or abort; with every slot taken
// the next upload waits (so the memory of uploads is bounded whatever the
// number of sessions publishing). A released slot's pages are returned to
// the kernel (MADV_DONTNEED): an idle Store holds no part memory. A
// transport that still reads a request body after its call returned (as
// net/http may on an error) reads a buffer that stays mapped.
type partSlots struct {
	mu       sync.Mutex
	free     chan [][]byte
	made     int
	max      int
	bufs     int
	partSize int
}

func newPartSlots(slots, bufs int, partSize int64) *partSlots {
	return &partSlots{free: make(chan [][]byte, slots), max: slots, bufs: bufs, partSize: int(partSize)}
}

// acquire returns a slot's buffers, waiting for one while all are held.
// Errors: ctx's, or the mmap's.
func (p *partSlots) acquire(ctx context.Context) ([][]byte, error) {
	select {
	case s := <-p.free:
		return s, nil
	default:
	}
	p.mu.Lock()
	if p.made < p.max {
		p.made++
		p.mu.Unlock()
		s := make([][]byte, 0, p.bufs)
		for range p.bufs {
			b, err := unix.Mmap(-1, 0, p.partSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
			if err != nil {
				for _, m := range s {
					unix.Munmap(m)
				}
				p.mu.Lock()
				p.made--
				p.mu.Unlock()
				return nil, err
			}
			s = append(s, b)
		}
		return s, nil
	}
	p.mu.Unlock()
	select {
	case s := <-p.free:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// release gives a slot back, its pages returned to the kernel.
func (p *partSlots) release(s [][]byte) {
	for _, b := range s {
		unix.Madvise(b, unix.MADV_DONTNEED)
	}
	p.free <- s
}
