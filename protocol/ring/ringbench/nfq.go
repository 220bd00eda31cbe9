package ringbench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// Delay is a user-space constant one-way delay for the packets an
// iptables NFQUEUE rule sends to queue q in the current network namespace:
// the stand-in for `tc netem delay`, which this kernel lacks
// (CONFIG_NET_SCH_NETEM is not set; nft's queue statement is missing too).
// It asks for metadata only and whole GSO packets, remembers each packet's
// arrival time and accepts packets in arrival order once they are d old,
// with batch verdicts. It runs until ctx ends. Adapted from the anchor
// bench's nfqdelay (raw netlink, standard library only).
func Delay(ctx context.Context, q uint16, d time.Duration, log io.Writer) error {
	return Impair(ctx, q, Impairment{Delay: d}, log)
}

// Impairment is what Impair does to the packets of its queue.
type Impairment struct {
	Delay time.Duration // constant one-way delay
	// Loss is the fraction of packets dropped (0.001 for 0.1 %), decided
	// per packet by a PRNG seeded with Seed, so the same packet sequence
	// loses the same packets. With Loss > 0 the queue asks the kernel to
	// segment GSO packets, so a packet is one wire packet (MTU sized), not a
	// 64 KiB GSO burst; this costs CPU per packet.
	Loss float64
	Seed uint64
}

// Dropper returns the loss decision of Impair: true means drop. It draws
// one 64-bit number per packet from a PCG seeded with seed.
func Dropper(loss float64, seed uint64) func() bool {
	if loss <= 0 {
		return func() bool { return false }
	}
	if loss >= 1 {
		return func() bool { return true }
	}
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	thr := uint64(loss * math.Exp2(64))
	return func() bool { return r.Uint64() < thr }
}

// Impair is Delay with packet loss: packets chosen by Dropper(im.Loss,
// im.Seed) get an NF_DROP verdict as they arrive; the others are accepted
// in arrival order im.Delay after they arrived.
func Impair(ctx context.Context, q uint16, im Impairment, log io.Writer) error {
	d := im.Delay
	if im.Loss < 0 || im.Loss > 1 || math.IsNaN(im.Loss) {
		return fmt.Errorf("nfqueue: loss %v, want a fraction in [0, 1]", im.Loss)
	}
	drop := Dropper(im.Loss, im.Seed)
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW, syscall.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("nfqueue: socket: %w", err)
	}
	defer syscall.Close(fd)
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 64<<20)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("nfqueue: bind: %w", err)
	}
	c := &nlConn{fd: fd}
	cfgType := uint16(nfnlSubsysQueue<<8 | nfqnlMsgConfig)
	flags := uint16(syscall.NLM_F_REQUEST | syscall.NLM_F_ACK)
	m := newNLMsg(cfgType, flags, q)
	m.attr(nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, 0})
	if err := c.request(m); err != nil {
		return fmt.Errorf("nfqueue: bind queue %d: %w", q, err)
	}
	m = newNLMsg(cfgType, flags, q)
	m.attr(nfqaCfgParams, append(be32(0), nfqnlCopyMeta))
	m.attr(nfqaCfgQueueMaxlen, be32(100000))
	m.attr(nfqaCfgMask, be32(nfqaCfgFGSO))
	if im.Loss > 0 {
		m.attr(nfqaCfgFlags, be32(0)) // kernel segments GSO packets: loss per wire packet
	} else {
		m.attr(nfqaCfgFlags, be32(nfqaCfgFGSO))
	}
	if err := c.request(m); err != nil {
		return fmt.Errorf("nfqueue: configure queue %d: %w", q, err)
	}
	fmt.Fprintf(log, "nfqdelay: queue %d, delay %v, loss %g (seed %d)\n", q, d, im.Loss, im.Seed)
	var nPkts, nDropped, recvErrs atomic.Uint64
	dropType := uint16(nfnlSubsysQueue<<8 | nfqnlMsgVerdict)
	type pkt struct {
		id uint32
		at time.Time
	}
	ch := make(chan pkt, 1<<20)
	go func() { // releaser: one OS thread, 1 ns timer slack
		runtime.LockOSThread()
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_TIMERSLACK, 1, 0)
		vType := uint16(nfnlSubsysQueue<<8 | nfqnlMsgVerdictBatch)
		verdict := func(last uint32) {
			vm := newNLMsg(vType, syscall.NLM_F_REQUEST, q)
			vm.attr(nfqaVerdictHdr, append(be32(nfAccept), be32(last)...))
			_ = c.send(vm)
		}
		for p := range ch {
			if w := time.Until(p.at.Add(d)); w > 0 {
				sleepFor(w)
			}
			last := p.id
		drain:
			for {
				select {
				case p2, ok := <-ch:
					if !ok {
						break drain
					}
					if w := time.Until(p2.at.Add(d)); w > 0 {
						verdict(last)
						sleepFor(w)
					}
					last = p2.id
				default:
					break drain
				}
			}
			verdict(last)
		}
	}()
	go func() { // unblock Recvfrom when ctx ends
		<-ctx.Done()
		syscall.Shutdown(fd, syscall.SHUT_RDWR)
		tv := syscall.NsecToTimeval(int64(time.Millisecond))
		syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	}()
	buf := make([]byte, 1<<20)
	pktType := uint16(nfnlSubsysQueue<<8 | nfqnlMsgPacket)
	for ctx.Err() == nil {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		now := time.Now()
		if err != nil {
			// ENOBUFS: lost notifications; their packets are accepted by
			// the next batch verdict (ids are ordered).
			if err != syscall.EINTR {
				recvErrs.Add(1)
			}
			continue
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, nm := range msgs {
			if nm.Header.Type != pktType || len(nm.Data) < 4 {
				continue
			}
			a := nm.Data[4:] // skip nfgenmsg
			for len(a) >= 4 {
				l := int(binary.NativeEndian.Uint16(a[0:]))
				t := binary.NativeEndian.Uint16(a[2:]) & 0x3fff
				if l < 4 || l > len(a) {
					break
				}
				if t == nfqaPacketHdr && l >= 8 {
					id := binary.BigEndian.Uint32(a[4:8])
					nPkts.Add(1)
					if drop() {
						// Sent before any later packet enters ch, so no
						// batch verdict can accept it first.
						vm := newNLMsg(dropType, syscall.NLM_F_REQUEST, q)
						vm.attr(nfqaVerdictHdr, append(be32(nfDrop), be32(id)...))
						_ = c.send(vm)
						nDropped.Add(1)
						break
					}
					ch <- pkt{id: id, at: now}
					break
				}
				a = a[(l+3)&^3:]
			}
		}
	}
	close(ch)
	fmt.Fprintf(log, "nfqdelay: %d packets, %d dropped, %d receive errors\n", nPkts.Load(), nDropped.Load(), recvErrs.Load())
	return nil
}

const (
	nfnlSubsysQueue      = 3
	nfqnlMsgPacket       = 0
	nfqnlMsgVerdict      = 1
	nfqnlMsgConfig       = 2
	nfqnlMsgVerdictBatch = 3
	nfqaPacketHdr        = 1
	nfqaVerdictHdr       = 2
	nfqaCfgCmd           = 1
	nfqaCfgParams        = 2
	nfqaCfgQueueMaxlen   = 3
	nfqaCfgMask          = 4
	nfqaCfgFlags         = 5
	nfqnlCfgCmdBind      = 1
	nfqnlCopyMeta        = 1
	nfqaCfgFGSO          = 1 << 2
	nfDrop               = 0
	nfAccept             = 1
)

type nlMsg struct{ b []byte }

// newNLMsg starts a netfilter netlink message: nlmsghdr (filled in by
// bytes) then nfgenmsg (family AF_UNSPEC, version 0, resource id).
func newNLMsg(typ, flags, resID uint16) *nlMsg {
	m := &nlMsg{b: make([]byte, syscall.NLMSG_HDRLEN+4)}
	binary.NativeEndian.PutUint16(m.b[4:], typ)
	binary.NativeEndian.PutUint16(m.b[6:], flags)
	m.b[syscall.NLMSG_HDRLEN] = syscall.AF_UNSPEC
	binary.BigEndian.PutUint16(m.b[syscall.NLMSG_HDRLEN+2:], resID)
	return m
}

func (m *nlMsg) attr(typ uint16, payload []byte) {
	l := 4 + len(payload)
	a := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(a[0:], uint16(l))
	binary.NativeEndian.PutUint16(a[2:], typ)
	copy(a[4:], payload)
	m.b = append(m.b, a...)
}

func (m *nlMsg) bytes(seq uint32) []byte {
	binary.NativeEndian.PutUint32(m.b[0:], uint32(len(m.b)))
	binary.NativeEndian.PutUint32(m.b[8:], seq)
	return m.b
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

type nlConn struct {
	fd  int
	seq atomic.Uint32
}

func (c *nlConn) send(m *nlMsg) error {
	return syscall.Sendto(c.fd, m.bytes(c.seq.Add(1)), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK})
}

// request sends m (with NLM_F_ACK) and waits for the kernel's answer.
func (c *nlConn) request(m *nlMsg) error {
	if err := c.send(m); err != nil {
		return err
	}
	seq := c.seq.Load()
	buf := make([]byte, 1<<16)
	for {
		n, _, err := syscall.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, nm := range msgs {
			if nm.Header.Type == syscall.NLMSG_ERROR && nm.Header.Seq == seq {
				if errno := int32(binary.NativeEndian.Uint32(nm.Data[0:4])); errno != 0 {
					return syscall.Errno(-errno)
				}
				return nil
			}
		}
	}
}

// sleepFor calls nanosleep(2) directly: the runtime's timers sleep through
// epoll with millisecond resolution, which adds about 0.5 ms per packet
// direction.
func sleepFor(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var rem syscall.Timespec
		if err := syscall.Nanosleep(&ts, &rem); err != syscall.EINTR {
			return
		}
		ts = rem
	}
}
