package server

import (
	"bytes"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the proto codec lenientCodec wraps
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// malformedMark starts the unknown fields of a message that did not parse
// (lenientCodec): field number 0 is invalid on the wire, so no parsed
// message carries it.
var malformedMark = []byte{0, 0xba, 0xd0}

// lenientCodec is gRPC's proto codec, except that a message that does not
// parse is not an error to gRPC — which would answer Internal before any
// handler ran — but an empty message marked as malformed (its unknown
// fields start with malformedMark, then the parser's error), which the
// handlers answer InvalidArgument (strictDecode, the upload's next).
// Services that do not look (health, reflection) see an empty request.
type lenientCodec struct{ base encoding.CodecV2 }

func newLenientCodec() lenientCodec { return lenientCodec{base: encoding.GetCodecV2("proto")} }

func (c lenientCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }
func (c lenientCodec) Name() string                           { return c.base.Name() }

func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	proto.Reset(m)
	m.ProtoReflect().SetUnknown(append(append([]byte(nil), malformedMark...), err.Error()...))
	return nil
}

// malformed is the InvalidArgument for a message lenientCodec marked, nil
// for any other.
func malformed(v any, what string) error {
	m, ok := v.(proto.Message)
	if !ok {
		return nil
	}
	u := m.ProtoReflect().GetUnknown()
	if !bytes.HasPrefix(u, malformedMark) {
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "the request does not parse as %s: %s", what, u[len(malformedMark):])
}
