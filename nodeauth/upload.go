package nodeauth

import (
	"crypto/ed25519"
	"encoding/hex"
)

// UploadDelta announces a delta upload (NodeService.UploadDelta): the job,
// the file's signature digest (hex) and size, and its compressed traces'
// size, for the hanzod whose instance key is Hanzod (hex; a signature for
// one hanzod never admits an upload at another). Seq is the file's
// metadata sequence; Timestamp bounds the announcement's replay, and the
// digest binds it to one file, so a replayed announcement can only upload
// the same file again (a duplicate).
type UploadDelta struct {
	Auth
	Hanzod      string
	Job         string
	Digest      string
	DeltaBytes  uint64
	TracesBytes uint64
}

// SignedBytes is what a node signs.
func (u UploadDelta) SignedBytes() []byte {
	e := header("uploaddelta", u.Auth)
	e.str(u.Hanzod)
	e.str(u.Job)
	e.str(u.Digest)
	e.u64(u.DeltaBytes)
	e.u64(u.TracesBytes)
	return e.Bytes()
}

// SignUpload signs u in place with the node's key (and sets Auth.Node).
func SignUpload(key ed25519.PrivateKey, u *UploadDelta) {
	u.Node = nodeID(key)
	u.Sign(key, u.SignedBytes())
}

// HanzodID is the hex form of hanzod's instance key that requests name.
func HanzodID(pub ed25519.PublicKey) string { return hex.EncodeToString(pub) }
