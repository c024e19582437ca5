package emulate

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
)

// kernelQueue is one line of /proc/net/netfilter/nfnetlink_queue, written by
// seq_show in net/netfilter/nfnetlink_queue.c:
//
//	queue_num peer_portid queue_total copy_mode copy_range queue_dropped queue_user_dropped id_sequence 1
type kernelQueue struct {
	Num         uint16
	PortID      uint32
	Total       uint64 // packets held for userspace right now
	CopyMode    uint8
	CopyRange   uint32
	Dropped     uint64 // queue full
	UserDropped uint64 // could not be sent to the socket (ENOBUFS and the like)
	IDSequence  uint32 // id of the last packet queued
}

// parseKernelQueues parses the whole file.
func parseKernelQueues(b []byte) ([]kernelQueue, error) {
	var qs []kernelQueue
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("nfnetlink_queue line %q: want at least 8 fields", sc.Text())
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(string(f[i]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("nfnetlink_queue line %q: field %d: %w", sc.Text(), i+1, err)
			}
			v[i] = n
		}
		qs = append(qs, kernelQueue{
			Num: uint16(v[0]), PortID: uint32(v[1]), Total: v[2], CopyMode: uint8(v[3]),
			CopyRange: uint32(v[4]), Dropped: v[5], UserDropped: v[6], IDSequence: uint32(v[7]),
		})
	}
	return qs, sc.Err()
}
