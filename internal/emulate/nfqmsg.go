package emulate

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Wire format of the nfnetlink_queue protocol, from the Linux uapi headers
// include/uapi/linux/netlink.h, netfilter/nfnetlink.h and
// netfilter/nfnetlink_queue.h. The netlink and attribute headers are in host
// byte order; everything nfnetlink_queue defines is big-endian.
//
//	nlmsghdr (16)     len u32 | type u16 | flags u16 | seq u32 | portid u32
//	nfgenmsg (4)      family u8 | version u8 | res_id be16 (= queue number)
//	nlattr* (4+data)  len u16 | type u16 | data, padded to 4 bytes
const (
	nlmsgHdrLen  = 16
	nfgenMsgLen  = 4
	nlaHdrLen    = 4
	nlmsgAlignTo = 4

	nlmsgError = 0x2 // NLMSG_ERROR
	nlmsgDone  = 0x3 // NLMSG_DONE

	nlmFRequest = 0x1 // NLM_F_REQUEST
	nlmFAck     = 0x4 // NLM_F_ACK

	nlaTypeMask = 0x3fff // strips NLA_F_NESTED and NLA_F_NET_BYTEORDER

	nfnlSubsysQueue = 3 // NFNL_SUBSYS_QUEUE
	nfnetlinkV0     = 0 // NFNETLINK_V0

	// enum nfqnl_msg_types
	nfqnlMsgPacket       = 0
	nfqnlMsgVerdict      = 1
	nfqnlMsgConfig       = 2
	nfqnlMsgVerdictBatch = 3

	// enum nfqnl_attr_type
	nfqaPacketHdr  = 1  // struct nfqnl_msg_packet_hdr (7 bytes, packed)
	nfqaVerdictHdr = 2  // struct nfqnl_msg_verdict_hdr
	nfqaTimestamp  = 4  // struct nfqnl_msg_packet_timestamp: be64 sec, be64 usec (CLOCK_REALTIME)
	nfqaPayload    = 10 // the first copy_range bytes of the packet
	nfqaCapLen     = 13 // be32 original length, present only when the payload was cut

	// enum nfqnl_attr_config
	nfqaCfgCmd         = 1 // struct nfqnl_msg_config_cmd
	nfqaCfgParams      = 2 // struct nfqnl_msg_config_params (5 bytes, packed)
	nfqaCfgQueueMaxlen = 3 // be32
	nfqaCfgMask        = 4 // be32
	nfqaCfgFlags       = 5 // be32

	// enum nfqnl_msg_config_cmds
	nfqnlCfgCmdBind   = 1
	nfqnlCfgCmdUnbind = 2

	// enum nfqnl_config_mode
	nfqnlCopyPacket = 2

	// NFQA_CFG_F_*: flags this package knows. NFQA_CFG_F_FAIL_OPEN (1) is
	// deliberately never set: a full queue must drop (and count), never
	// pass packets without their delay.
	nfqaCfgFGSO = 0x4

	// Netfilter verdicts (include/uapi/linux/netfilter.h).
	nfDrop   = 0
	nfAccept = 1
)

// nfqType is the netlink message type of an nfnetlink_queue message.
func nfqType(msg uint16) uint16 { return nfnlSubsysQueue<<8 | msg }

func nlmsgAlign(n int) int { return (n + nlmsgAlignTo - 1) &^ (nlmsgAlignTo - 1) }

// appendNfqHeader appends a netlink header and nfgenmsg for a message whose
// total length (headers included) is total.
func appendNfqHeader(b []byte, total int, msg uint16, flags uint16, seq uint32, queue uint16) []byte {
	b = binary.NativeEndian.AppendUint32(b, uint32(total))
	b = binary.NativeEndian.AppendUint16(b, nfqType(msg))
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0) // to the kernel
	b = append(b, 0 /* AF_UNSPEC */, nfnetlinkV0)
	return binary.BigEndian.AppendUint16(b, queue)
}

func appendAttrHeader(b []byte, dataLen int, typ uint16) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(nlaHdrLen+dataLen))
	return binary.NativeEndian.AppendUint16(b, typ)
}

func appendBE32Attr(b []byte, typ uint16, v uint32) []byte {
	b = appendAttrHeader(b, 4, typ)
	return binary.BigEndian.AppendUint32(b, v)
}

// verdictMsgLen is the length of a verdict message: headers plus one
// NFQA_VERDICT_HDR attribute.
const verdictMsgLen = nlmsgHdrLen + nfgenMsgLen + nlaHdrLen + 8

// appendVerdict appends one NFQNL_MSG_VERDICT (batch false: the packet with
// this id) or NFQNL_MSG_VERDICT_BATCH (batch true: every packet still queued
// whose id is not after id) message. No ack is asked for; the kernel reports
// failures anyway as NLMSG_ERROR messages on the socket.
func appendVerdict(b []byte, queue uint16, seq uint32, batch bool, verdict, id uint32) []byte {
	msg := uint16(nfqnlMsgVerdict)
	if batch {
		msg = nfqnlMsgVerdictBatch
	}
	b = appendNfqHeader(b, verdictMsgLen, msg, nlmFRequest, seq, queue)
	b = appendAttrHeader(b, 8, nfqaVerdictHdr)
	b = binary.BigEndian.AppendUint32(b, verdict)
	return binary.BigEndian.AppendUint32(b, id)
}

// queueParams is what a bind message configures on a queue.
type queueParams struct {
	CopyRange uint32 // bytes of each packet copied to us (COPY_PACKET)
	MaxLen    uint32 // packets the kernel holds for us before dropping
	GSO       bool   // hand GSO aggregates over whole instead of segmenting them
}

// appendBind appends an NFQNL_MSG_CONFIG message that binds the queue to this
// socket and sets copy mode, queue length and flags in one go, asking for an
// ack. The flags are always written with their mask so the kernel state is
// exactly what we asked for (in particular, FAIL_OPEN is cleared).
func appendBind(b []byte, queue uint16, seq uint32, p queueParams) []byte {
	const total = nlmsgHdrLen + nfgenMsgLen +
		nlaHdrLen + 4 + // CMD
		nlaHdrLen + 8 + // PARAMS: 5 bytes padded to 8
		3*(nlaHdrLen+4) // QUEUE_MAXLEN, MASK, FLAGS
	b = appendNfqHeader(b, total, nfqnlMsgConfig, nlmFRequest|nlmFAck, seq, queue)
	b = appendAttrHeader(b, 4, nfqaCfgCmd)
	b = append(b, nfqnlCfgCmdBind, 0, 0, 0) // command, _pad, pf (unused since Linux 3.8)
	b = appendAttrHeader(b, 5, nfqaCfgParams)
	b = binary.BigEndian.AppendUint32(b, p.CopyRange)
	b = append(b, nfqnlCopyPacket, 0, 0, 0)
	b = appendBE32Attr(b, nfqaCfgQueueMaxlen, p.MaxLen)
	var flags uint32
	if p.GSO {
		flags |= nfqaCfgFGSO
	}
	// The mask covers FAIL_OPEN, CONNTRACK, GSO, UID_GID, SECCTX: all off
	// except what we set.
	b = appendBE32Attr(b, nfqaCfgMask, 0x1f)
	return appendBE32Attr(b, nfqaCfgFlags, flags)
}

// appendUnbind appends an NFQNL_MSG_CONFIG unbind command. Packets still
// queued are dropped by the kernel.
func appendUnbind(b []byte, queue uint16, seq uint32) []byte {
	const total = nlmsgHdrLen + nfgenMsgLen + nlaHdrLen + 4
	b = appendNfqHeader(b, total, nfqnlMsgConfig, nlmFRequest|nlmFAck, seq, queue)
	b = appendAttrHeader(b, 4, nfqaCfgCmd)
	return append(b, nfqnlCfgCmdUnbind, 0, 0, 0)
}

// nlMessage is one netlink message inside a received datagram.
type nlMessage struct {
	Type    uint16
	Flags   uint16
	Seq     uint32
	Payload []byte // after the netlink header
}

var errShortMessage = errors.New("netlink message shorter than its header says")

// nextMessage splits the first netlink message off b. It returns the rest,
// or an error when b does not hold a whole message (a datagram cut by a
// receive buffer that was too small).
func nextMessage(b []byte) (m nlMessage, rest []byte, err error) {
	if len(b) < nlmsgHdrLen {
		return m, nil, errShortMessage
	}
	n := int(binary.NativeEndian.Uint32(b))
	if n < nlmsgHdrLen || n > len(b) {
		return m, nil, errShortMessage
	}
	m = nlMessage{
		Type:    binary.NativeEndian.Uint16(b[4:]),
		Flags:   binary.NativeEndian.Uint16(b[6:]),
		Seq:     binary.NativeEndian.Uint32(b[8:]),
		Payload: b[nlmsgHdrLen:n],
	}
	if a := nlmsgAlign(n); a < len(b) {
		rest = b[a:]
	}
	return m, rest, nil
}

// packetInfo is what the emulator needs from an NFQNL_MSG_PACKET message.
type packetInfo struct {
	Queue      uint16
	ID         uint32
	HWProtocol uint16 // ethertype, e.g. 0x0800 for IPv4
	Hook       uint8
	// Len is the packet's length from its network header on: NFQA_CAP_LEN
	// when the kernel cut the copy, else the length of NFQA_PAYLOAD. For a
	// GSO aggregate it is the whole aggregate.
	Len uint32
	// Timestamp is when the packet was received (CLOCK_REALTIME, ns, µs
	// resolution), 0 when the kernel had none: NFQA_TIMESTAMP is only sent
	// when the skb carries a receive time, that is when some socket on the
	// host has asked for timestamps, and never for locally made packets.
	Timestamp int64
}

// parsePacket decodes the payload of an NFQNL_MSG_PACKET message. A message
// with no NFQA_PACKET_HDR is an error: without its id the packet cannot be
// given a verdict.
func parsePacket(payload []byte) (p packetInfo, err error) {
	if len(payload) < nfgenMsgLen {
		return p, errShortMessage
	}
	p.Queue = binary.BigEndian.Uint16(payload[2:])
	var haveHdr, haveCap bool
	b := payload[nfgenMsgLen:]
	for len(b) >= nlaHdrLen {
		alen := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask
		if alen < nlaHdrLen || alen > len(b) {
			return p, fmt.Errorf("nfqueue packet message: attribute %d has length %d with %d bytes left: %w", typ, alen, len(b), errShortMessage)
		}
		data := b[nlaHdrLen:alen]
		switch typ {
		case nfqaPacketHdr:
			if len(data) < 7 {
				return p, fmt.Errorf("nfqueue packet header is %d bytes, want 7", len(data))
			}
			p.ID = binary.BigEndian.Uint32(data)
			p.HWProtocol = binary.BigEndian.Uint16(data[4:])
			p.Hook = data[6]
			haveHdr = true
		case nfqaCapLen:
			if len(data) >= 4 {
				p.Len = binary.BigEndian.Uint32(data)
				haveCap = true
			}
		case nfqaPayload:
			if !haveCap {
				p.Len = uint32(len(data))
			}
		case nfqaTimestamp:
			if len(data) >= 16 {
				sec := int64(binary.BigEndian.Uint64(data))
				usec := int64(binary.BigEndian.Uint64(data[8:]))
				p.Timestamp = sec*1e9 + usec*1e3
			}
		}
		a := nlmsgAlign(alen)
		if a >= len(b) {
			break
		}
		b = b[a:]
	}
	if !haveHdr {
		return p, errors.New("nfqueue packet message without NFQA_PACKET_HDR")
	}
	return p, nil
}

// parseError decodes the payload of an NLMSG_ERROR message: the (negative)
// errno, 0 for an ack, and the sequence number of the request it answers.
func parseError(payload []byte) (errno int32, seq uint32, err error) {
	if len(payload) < 4+nlmsgHdrLen {
		return 0, 0, errShortMessage
	}
	errno = int32(binary.NativeEndian.Uint32(payload))
	seq = binary.NativeEndian.Uint32(payload[4+8:])
	return errno, seq, nil
}
