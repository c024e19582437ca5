package capture

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gopacket/gopacket/layers"
)

// MaxRecordBytes is the longest packet record read: libpcap's
// MAXIMUM_SNAPLEN. tcpdump refuses a longer record as corrupt, and so
// does Analyze, before it allocates anything for it.
const MaxRecordBytes = 262144

// maxBlockBytes bounds a pcapng block that is read whole (a packet block
// with its options, an interface block): a packet of MaxRecordBytes with
// room for options. Other blocks are skipped without being kept.
const maxBlockBytes = MaxRecordBytes + 1<<20

// ErrCorrupt: a header or record holds values no capture writer makes
// (a record longer than the packet or than the capture's snap length, an
// interface that does not exist, reserved bits set).
var ErrCorrupt = errors.New("the capture is damaged")

// record is one packet as a capture file holds it.
type record struct {
	data     []byte // the captured bytes (valid until the next read)
	linkType layers.LinkType
	origLen  int // the packet's length on the wire
}

// recordReader reads the packet records of one capture format; io.EOF at
// the end of the file, an error wrapping ErrTruncated or ErrCorrupt for a
// damaged one.
type recordReader interface {
	next() (record, error)
	// linkTypes names the link layers of the capture's interfaces, in
	// the order they were declared, each once.
	linkTypes() []layers.LinkType
}

// readFull is io.ReadFull with the end of the file inside what it reads
// reported as ErrTruncated (what says what was being read).
func readFull(r io.Reader, b []byte, what string) error {
	n, err := io.ReadFull(r, b)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: the file ends inside %s, %d bytes short", ErrTruncated, what, len(b)-n)
	}
	return err
}

// pcapReader reads the classic pcap format (libpcap's savefile).
type pcapReader struct {
	r       io.Reader
	order   binary.ByteOrder
	snaplen int // the header's, or MaxRecordBytes when it claims more (or 0), as libpcap reads it
	lt      layers.LinkType
	buf     []byte
	n       int
}

func newPcapReader(r io.Reader) (*pcapReader, error) {
	var h [24]byte
	if err := readFull(r, h[:], "the file header"); err != nil {
		return nil, err
	}
	p := &pcapReader{r: r}
	switch binary.LittleEndian.Uint32(h[:4]) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		p.order = binary.LittleEndian
	default:
		p.order = binary.BigEndian
	}
	if major, minor := p.order.Uint16(h[4:]), p.order.Uint16(h[6:]); major != 2 || minor > 4 {
		return nil, fmt.Errorf("%w: pcap version %d.%d (tcpdump writes 2.4)", ErrNotCapture, major, minor)
	}
	snap := p.order.Uint32(h[16:])
	p.snaplen = int(min(snap, MaxRecordBytes))
	if snap == 0 {
		p.snaplen = MaxRecordBytes
	}
	// The link type field holds the link type in its low 16 bits and,
	// above, the FCS length (bits 28-31) and its flag (bit 26); bits 16-25
	// are reserved and zero.
	lt := p.order.Uint32(h[20:])
	if lt&0x03ff0000 != 0 {
		return nil, fmt.Errorf("%w: link type field %d (%#x) has reserved bits set", ErrCorrupt, lt, lt)
	}
	p.lt = layers.LinkType(lt & 0xffff)
	return p, nil
}

func (p *pcapReader) linkTypes() []layers.LinkType { return []layers.LinkType{p.lt} }

func (p *pcapReader) next() (record, error) {
	var h [16]byte
	n, err := io.ReadFull(p.r, h[:])
	switch {
	case err == io.EOF:
		return record{}, io.EOF
	case err == io.ErrUnexpectedEOF:
		return record{}, fmt.Errorf("%w: the file ends inside the record header of packet %d (%d of its 16 bytes)", ErrTruncated, p.n+1, n)
	case err != nil:
		return record{}, err
	}
	capLen, origLen := p.order.Uint32(h[8:]), p.order.Uint32(h[12:])
	if err := checkLengths(p.n+1, capLen, origLen, p.snaplen); err != nil {
		return record{}, err
	}
	if cap(p.buf) < int(capLen) {
		p.buf = make([]byte, capLen)
	}
	data := p.buf[:capLen]
	if err := readFull(p.r, data, fmt.Sprintf("packet %d", p.n+1)); err != nil {
		return record{}, err
	}
	p.n++
	return record{data: data, linkType: p.lt, origLen: int(origLen)}, nil
}

// checkLengths refuses a record (number n) whose captured length passes
// the packet's length, the snap length (0: none) or MaxRecordBytes.
func checkLengths(n int, capLen, origLen uint32, snaplen int) error {
	switch {
	case capLen > MaxRecordBytes:
		return fmt.Errorf("%w: packet %d claims %d captured bytes, more than libpcap's maximum of %d", ErrCorrupt, n, capLen, MaxRecordBytes)
	case capLen > origLen:
		return fmt.Errorf("%w: packet %d claims %d captured bytes of a %d-byte packet", ErrCorrupt, n, capLen, origLen)
	case snaplen > 0 && int(capLen) > snaplen:
		return fmt.Errorf("%w: packet %d claims %d captured bytes, more than the snap length %d", ErrCorrupt, n, capLen, snaplen)
	}
	return nil
}

// ngInterface is one interface description block of a pcapng section.
type ngInterface struct {
	linkType layers.LinkType
	snaplen  int // 0: no limit
}

// ngReader reads pcapng (one section, any number of interfaces, each
// packet decoded with its own interface's link type).
type ngReader struct {
	r      *bufio.Reader
	order  binary.ByteOrder
	ifaces []ngInterface
	buf    []byte
	n      int
	blocks int
}

// pcapng block types.
const (
	ngSHB = 0x0a0d0d0a
	ngIDB = 0x00000001
	ngOPB = 0x00000002
	ngSPB = 0x00000003
	ngEPB = 0x00000006
)

func newNgReader(r *bufio.Reader) (*ngReader, error) {
	g := &ngReader{r: r}
	typ, body, err := g.block()
	if err == io.EOF {
		err = fmt.Errorf("%w: the file is empty", ErrNotCapture)
	}
	if err != nil {
		return nil, err
	}
	if typ != ngSHB {
		return nil, fmt.Errorf("%w: the first block is of type %#x, not a section header", ErrNotCapture, typ)
	}
	if len(body) < 16 {
		return nil, fmt.Errorf("%w: a section header of %d bytes", ErrCorrupt, len(body)+12)
	}
	if major := g.order.Uint16(body[4:]); major != 1 {
		return nil, fmt.Errorf("%w: pcapng version %d.%d (tcpdump writes 1.0)", ErrNotCapture, major, g.order.Uint16(body[6:]))
	}
	return g, nil
}

// block reads the next block whole: its type and body (without the type
// and the two lengths). A block of a type Analyze does not read is
// skipped and returned with a nil body. io.EOF at the end of the file.
func (g *ngReader) block() (uint32, []byte, error) {
	var h [8]byte
	n, err := io.ReadFull(g.r, h[:])
	switch {
	case err == io.EOF:
		return 0, nil, io.EOF
	case err == io.ErrUnexpectedEOF:
		return 0, nil, fmt.Errorf("%w: the file ends inside the header of block %d, after %d packets (%d of its 8 bytes)", ErrTruncated, g.blocks+1, g.n, n)
	case err != nil:
		return 0, nil, err
	}
	g.blocks++
	typ := binary.LittleEndian.Uint32(h[:]) // a section header's type reads the same either way
	if typ == ngSHB {
		if g.order != nil {
			return 0, nil, fmt.Errorf("%w: block %d starts a second section (concatenated captures); analyze reads one section: split the file", ErrCorrupt, g.blocks)
		}
		var bom [4]byte
		if err := readFull(g.r, bom[:], "the section header"); err != nil {
			return 0, nil, err
		}
		switch binary.LittleEndian.Uint32(bom[:]) {
		case 0x1a2b3c4d:
			g.order = binary.LittleEndian
		case 0x4d3c2b1a:
			g.order = binary.BigEndian
		default:
			return 0, nil, fmt.Errorf("%w: the section header's byte-order magic is %x", ErrNotCapture, bom)
		}
		total := g.order.Uint32(h[4:])
		if err := g.checkTotal(total, 28); err != nil {
			return 0, nil, err
		}
		body, err := g.read(int(total), 12)
		if err != nil {
			return 0, nil, err
		}
		copy(body, bom[:])
		return typ, body, nil
	}
	if g.order == nil {
		return 0, nil, fmt.Errorf("%w: it does not start with a section header", ErrNotCapture)
	}
	typ = g.order.Uint32(h[:])
	total := g.order.Uint32(h[4:])
	if err := g.checkTotal(total, 12); err != nil {
		return 0, nil, err
	}
	switch typ {
	case ngIDB, ngOPB, ngSPB, ngEPB:
		body, err := g.read(int(total), 8)
		return typ, body, err
	}
	// Name resolution, statistics, secrets, custom blocks: skipped
	// without being kept, whatever their size.
	if _, err := io.CopyN(io.Discard, g.r, int64(total)-12); err != nil {
		return 0, nil, g.cut(err)
	}
	var trail [4]byte
	if err := readFull(g.r, trail[:], fmt.Sprintf("block %d (after %d packets)", g.blocks, g.n)); err != nil {
		return 0, nil, err
	}
	if t := g.order.Uint32(trail[:]); t != total {
		return 0, nil, fmt.Errorf("%w: block %d is %d bytes long at its start and %d at its end", ErrCorrupt, g.blocks, total, t)
	}
	return typ, nil, nil
}

func (g *ngReader) cut(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: the file ends inside block %d, after %d packets", ErrTruncated, g.blocks, g.n)
	}
	return err
}

// checkTotal refuses a block length that is not a multiple of 4, shorter
// than its type's fixed part (least) or, for a block read whole, longer
// than maxBlockBytes.
func (g *ngReader) checkTotal(total uint32, least uint32) error {
	if total%4 != 0 || total < least {
		return fmt.Errorf("%w: block %d has a length of %d bytes", ErrCorrupt, g.blocks, total)
	}
	return nil
}

// read reads the rest of a block of total bytes of which done are read,
// and returns its body (the bytes between the leading length and the
// trailing one), after checking that the trailing length matches.
func (g *ngReader) read(total, done int) ([]byte, error) {
	if total > maxBlockBytes {
		return nil, fmt.Errorf("%w: block %d claims %d bytes, more than a packet of libpcap's maximum (%d bytes) and its options", ErrCorrupt, g.blocks, total, MaxRecordBytes)
	}
	if cap(g.buf) < total {
		g.buf = make([]byte, total)
	}
	b := g.buf[:total]
	if err := readFull(g.r, b[done:], fmt.Sprintf("block %d (after %d packets)", g.blocks, g.n)); err != nil {
		return nil, err
	}
	if t := g.order.Uint32(b[total-4:]); int(t) != total {
		return nil, fmt.Errorf("%w: block %d is %d bytes long at its start and %d at its end", ErrCorrupt, g.blocks, total, t)
	}
	return b[8 : total-4], nil
}

func (g *ngReader) linkTypes() []layers.LinkType {
	var out []layers.LinkType
	seen := map[layers.LinkType]bool{}
	for _, i := range g.ifaces {
		if !seen[i.linkType] {
			seen[i.linkType] = true
			out = append(out, i.linkType)
		}
	}
	return out
}

func (g *ngReader) next() (record, error) {
	for {
		typ, body, err := g.block()
		if err != nil {
			return record{}, err
		}
		switch typ {
		case ngIDB:
			if len(body) < 8 {
				return record{}, fmt.Errorf("%w: block %d, an interface description, is %d bytes long", ErrCorrupt, g.blocks, len(body)+12)
			}
			g.ifaces = append(g.ifaces, ngInterface{linkType: layers.LinkType(g.order.Uint16(body)), snaplen: int(min(g.order.Uint32(body[4:]), MaxRecordBytes+1))})
			continue
		case ngEPB, ngOPB:
			var id, capLen, origLen uint32
			if typ == ngEPB {
				if len(body) < 20 {
					return record{}, fmt.Errorf("%w: block %d, a packet, is %d bytes long", ErrCorrupt, g.blocks, len(body)+12)
				}
				id, capLen, origLen = g.order.Uint32(body), g.order.Uint32(body[12:]), g.order.Uint32(body[16:])
			} else {
				if len(body) < 20 {
					return record{}, fmt.Errorf("%w: block %d, a packet, is %d bytes long", ErrCorrupt, g.blocks, len(body)+12)
				}
				id, capLen, origLen = uint32(g.order.Uint16(body)), g.order.Uint32(body[12:]), g.order.Uint32(body[16:])
			}
			iface, err := g.iface(id)
			if err != nil {
				return record{}, err
			}
			if err := checkLengths(g.n+1, capLen, origLen, iface.snaplen); err != nil {
				return record{}, err
			}
			if int(capLen) > len(body)-20 {
				return record{}, fmt.Errorf("%w: packet %d claims %d captured bytes in a block of %d", ErrCorrupt, g.n+1, capLen, len(body)+12)
			}
			g.n++
			return record{data: body[20 : 20+capLen], linkType: iface.linkType, origLen: int(origLen)}, nil
		case ngSPB:
			if len(body) < 4 {
				return record{}, fmt.Errorf("%w: block %d, a packet, is %d bytes long", ErrCorrupt, g.blocks, len(body)+12)
			}
			iface, err := g.iface(0)
			if err != nil {
				return record{}, err
			}
			origLen := g.order.Uint32(body)
			capLen := origLen
			if iface.snaplen > 0 {
				capLen = min(capLen, uint32(iface.snaplen))
			}
			if err := checkLengths(g.n+1, capLen, origLen, 0); err != nil {
				return record{}, err
			}
			if int(capLen) > len(body)-4 {
				return record{}, fmt.Errorf("%w: packet %d claims %d captured bytes in a block of %d", ErrCorrupt, g.n+1, capLen, len(body)+12)
			}
			g.n++
			return record{data: body[4 : 4+capLen], linkType: iface.linkType, origLen: int(origLen)}, nil
		}
	}
}

// iface is the interface a packet block names.
func (g *ngReader) iface(id uint32) (ngInterface, error) {
	if int64(id) >= int64(len(g.ifaces)) {
		return ngInterface{}, fmt.Errorf("%w: packet %d names interface %d, and the section describes %d", ErrCorrupt, g.n+1, id, len(g.ifaces))
	}
	return g.ifaces[id], nil
}
