package nodeclient

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"

	"time"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/protocol/checkpkg"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/nodeauth"
)

// ChunkBytes is the most file or trace bytes one upload message carries:
// with its framing it stays under hanzod's 1 MiB message bound.
const ChunkBytes = 1<<20 - 1024

// Upload sends a delta file and its compressed traces to hanzod (instance
// key hanzod) as one UploadDelta stream, announced with key's signature at
// time now (docs/orchestrator.md, "Delta upload"): the announcement, the
// file's first chunk (its header and whole metadata entry, which hanzod
// checks before it reads on), the rest of the file, the traces. The
// metadata must be the file's first entry and fit the first chunk, as
// gym's and gym_protocol's writers put it.
func Upload(ctx context.Context, node pb.NodeServiceClient, key ed25519.PrivateKey, hanzod ed25519.PublicKey, now time.Time, file, traces []byte) (*pb.SubmitDeltaResponse, error) {
	head := file[:min(len(file), ChunkBytes)]
	info, err := delta.ReadHead(ctx, head, delta.Limits{MaxMetadataBytes: ChunkBytes})
	if err != nil {
		return nil, fmt.Errorf("nodeclient: upload: %w", err)
	}
	// The announcement names the job the metadata names; whether the rest
	// of the metadata is what hanzod wants is hanzod's to say (a verdict).
	var job string
	if raw, ok := info.Metadata.Get(delta.KeyJob); ok {
		if err := json.Unmarshal(raw, &job); err != nil {
			return nil, fmt.Errorf("nodeclient: upload: the metadata's %s is %s, not a string", delta.KeyJob, raw)
		}
	}
	ann := nodeauth.UploadDelta{Auth: nodeauth.Auth{Timestamp: now.UnixMilli(), Audience: hanzod}, Job: job,
		Digest: checkpkg.FileDigest(file), DeltaBytes: uint64(len(file)), TracesBytes: uint64(len(traces))}
	nodeauth.SignUpload(key, &ann)
	stream, err := node.UploadDelta(ctx)
	if err != nil {
		return nil, err
	}
	msgs := []*pb.DeltaChunk{{Part: &pb.DeltaChunk_Header{Header: &pb.DeltaUpload{Auth: pbAuth(ann.Auth), Job: ann.Job,
		Digest: ann.Digest, DeltaBytes: ann.DeltaBytes, TracesBytes: ann.TracesBytes}}}}
	for off := 0; off < len(file); off += ChunkBytes {
		msgs = append(msgs, &pb.DeltaChunk{Part: &pb.DeltaChunk_Delta{Delta: file[off:min(len(file), off+ChunkBytes)]}})
	}
	for off := 0; off < len(traces); off += ChunkBytes {
		msgs = append(msgs, &pb.DeltaChunk{Part: &pb.DeltaChunk_Traces{Traces: traces[off:min(len(traces), off+ChunkBytes)]}})
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			// hanzod answered before the end (a verdict from the head, a
			// refusal): CloseAndRecv has it.
			break
		}
	}
	return stream.CloseAndRecv()
}
